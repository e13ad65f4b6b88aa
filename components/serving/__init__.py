"""serving: an OpenAI-compatible HTTP server for a trained model."""
