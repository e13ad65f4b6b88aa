"""tracking: the MLflow side of a run — the one adapter to MLflow, the workflow's parent run, each step's record."""
