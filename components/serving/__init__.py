"""serving: an OpenAI-compatible HTTP server for a trained model (ours), or the command that runs vLLM instead.

Modules: `protocol` (the wire format), `textstream` (token ids to text deltas), `engine` (the model),
`app` (the FastAPI routes), `command` (the server container's command per engine), `cli` (the entry point).
"""
