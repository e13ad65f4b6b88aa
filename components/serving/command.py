"""The server container's command line for each serving engine, so a manifest can choose ours or vLLM.

Both engines speak the same API (`/health`, `/v1/models`, `/v1/completions`, `/v1/chat/completions`), so the
load-test client works against either; vLLM needs an image that has it installed (such as vllm/vllm-openai).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ENGINES", "ServerCommand", "ServingEngine", "server_command"]

ServingEngine = Literal["ours", "vllm"]
ENGINES: tuple[ServingEngine, ...] = ("ours", "vllm")


class ServerCommand(BaseModel):
    """`python -m <module> <args>`: what the server container runs."""

    model_config = ConfigDict(frozen=True)

    module: str
    args: list[str] = Field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        """The whole command line."""
        return ["python", "-m", self.module, *self.args]


def server_command(
    engine: ServingEngine, model: str, port: int, *, host: str = "0.0.0.0", served_model_name: str = ""
) -> ServerCommand:
    """The command that serves `model` on `port` with `engine` ("ours": components.serving; "vllm")."""
    if engine not in ENGINES:
        raise ValueError(f"unknown serving engine {engine!r}; choose one of {', '.join(ENGINES)}")
    common = ["--model", model, "--port", str(port), "--host", host]
    if served_model_name:
        common += ["--served-model-name", served_model_name]
    if engine == "vllm":
        return ServerCommand(module="vllm.entrypoints.openai.api_server", args=common)
    return ServerCommand(module="components.serving", args=common)
