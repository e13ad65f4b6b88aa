"""loadtest: drive a model server and measure latency against SLOs."""
