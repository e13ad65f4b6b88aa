"""detect-logs: find out from the service's logs whether the model needs work."""
