"""What one load-test request asks for and what happened to it: frozen records with units in their names.

Everything downstream (metrics, SLO gate, the records file) is computed from `RequestRecord`s after the run,
so a run can be re-analysed from its records alone.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RequestRecord", "RequestSpec"]


class RequestSpec(BaseModel):
    """One request to send: a prompt and how many tokens to ask for."""

    model_config = ConfigDict(frozen=True)

    prompt: str  # a conversation's too, as a model without a chat template reads it (for /v1/completions)
    max_tokens: int = Field(gt=0)
    expected: str = ""  # the reference completion, when the request came from an evaluation set
    messages: list[dict[str, str]] = []  # a conversation's messages, sent as they are to /v1/chat/completions


class RequestRecord(BaseModel):
    """One request's measurements; a failed request has `error` set and no latency figures that count."""

    model_config = ConfigDict(frozen=True)

    index: int
    start_s: float  # when it was sent, seconds after the run began
    ttft_ms: float = 0.0  # time to the first chunk that carried text
    itl_ms: tuple[float, ...] = ()  # gaps between consecutive text chunks
    latency_ms: float = 0.0  # end to end: sent to last text chunk (the stream's end when no text came)
    prompt_tokens: int = 0  # from the server's usage, 0 when it reports none
    output_tokens: int = 0  # from the server's usage, else the number of text chunks
    output_text: str = ""
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the request completed."""
        return self.error is None

    @property
    def tpot_ms(self) -> float:
        """Time per output token after the first (vLLM's TPOT); 0 for a request with one token or none."""
        if self.output_tokens <= 1:
            return 0.0
        return (self.latency_ms - self.ttft_ms) / (self.output_tokens - 1)
