"""release: register a model version with its lineage in MLflow, move `champion`/`previous`, roll back."""
