"""The engine of the local runner: templates to nodes — DAG, steps, retries, hooks, leaves — and the run's state."""
