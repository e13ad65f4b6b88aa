"""loadtest: drive an OpenAI-compatible server with an asyncio load generator and judge it against SLOs.

Modules: `records` (what one request asked and measured), `dataset` (prompts), `arrivals` (Poisson/gamma),
`client` (one streamed request), `sse` (the same on asyncio's callbacks, for http://), `http1` and `wire` (our lean
HTTP/1.1 client on asyncio streams), `runner` (closed or open loop),
`metrics` (the pure figures), `gate` (the SLO verdict), `session` (a whole test), `cli` (`vcpilot loadtest`);
`__main__` is the pipeline's client task.
"""
