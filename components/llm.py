"""The OpenAI-compatible endpoint vcpilot's LLM features call: its URL, model and key, read from the environment once.

The agent's LLM policy and the log parser's optional template refinement talk to the same endpoint, configured
by the same variables: VCPILOT_LLM_URL (the API's base, `http://localhost:8000/v1`), VCPILOT_LLM_MODEL, and
VCPILOT_LLM_API_KEY (or OPENAI_API_KEY).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from components.errors import InputError

__all__ = ["KEY_ENVS", "MODEL_ENV", "URL_ENV", "LLMEndpoint", "header_key"]

URL_ENV = "VCPILOT_LLM_URL"
MODEL_ENV = "VCPILOT_LLM_MODEL"
KEY_ENVS = ("VCPILOT_LLM_API_KEY", "OPENAI_API_KEY")


@dataclass(frozen=True)
class LLMEndpoint:
    """Where the LLM is: the API's base URL (without `/chat/completions`), the model it serves, its key if any."""

    url: str
    model: str
    api_key: str | None = field(default=None, repr=False)  # never printed

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, otherwise: str) -> LLMEndpoint:
        """The endpoint the environment names; InputError (a ValueError) naming the variable to set, or `otherwise`."""
        env = os.environ if environ is None else environ
        url = env.get(URL_ENV, "").strip()
        if not url:
            raise InputError(
                f"{URL_ENV} is not set: point it at an OpenAI-compatible API (e.g. http://localhost:8000/v1) "
                f"or {otherwise}"
            )
        model = env.get(MODEL_ENV, "").strip()
        if not model:
            raise InputError(f"{MODEL_ENV} is not set: name the model the endpoint at {URL_ENV} serves")
        key = next((env[name] for name in KEY_ENVS if env.get(name)), None)
        return cls(url, model, header_key(key))


def header_key(key: str | None) -> str | None:
    """`key` as the Authorization header carries it (without the whitespace around it); InputError when it cannot.

    Only visible ASCII travels in a header: a key pasted with a curly quote or a byte-order mark made httpx raise
    UnicodeEncodeError mid-request. The sentence never quotes the key.
    """
    key = (key or "").strip()
    if not all("!" <= c <= "~" for c in key):
        raise InputError(
            f"the LLM API key ({' or '.join(KEY_ENVS)}) holds a character an HTTP header cannot carry "
            "(a space, a non-ASCII or a control character); copy the key again"
        )
    return key or None
