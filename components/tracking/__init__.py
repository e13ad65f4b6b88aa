"""tracking: the MLflow side of a workflow run — its parent run, where every step's record goes."""
