"""`vcpilot serve` and `python -m components.serving`: serve a model directory over the OpenAI API."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from components.entry import new_app
from components.errors import InputError
from components.ports import check_port_free

__all__ = ["app", "serve_command"]


def serve_command(
    model: Annotated[Path, typer.Option(help="Model directory (Hugging Face format; ours or any causal LM).")],
    port: Annotated[int, typer.Option(help="TCP port to listen on.")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind (0.0.0.0: reachable from other pods).")] = "0.0.0.0",
    # The choices are components.serving.command.ENGINES (its pydantic models are not needed to say them).
    engine: Annotated[
        Literal["ours", "vllm"], typer.Option(help="Serving engine: ours, or vllm (must be installed).")
    ] = "ours",
    served_model_name: Annotated[
        str, typer.Option(help="Name clients use in `model` (default: the --model path, as vLLM does).")
    ] = "",
    device: Annotated[str, typer.Option(help="Torch device (default: cuda when available, else cpu).")] = "",
    cpu_threads: Annotated[
        int, typer.Option(help="Torch threads on CPU (1 suits one decoding stream of a small model).")
    ] = 1,
    access_log: Annotated[bool, typer.Option(help="Log every request.")] = False,
) -> None:
    """Serve a model with /v1/completions, /v1/chat/completions (streaming or not), /v1/models and /health."""
    if not 0 < port < 65536:
        raise InputError(f"--port {port} is not a TCP port; use 1-65535")
    if cpu_threads < 1:
        raise InputError(f"--cpu-threads must be at least 1, got {cpu_threads}")
    check_port_free(host, port)  # a bad --host or a taken port is one sentence, said before a model loads
    if engine == "vllm":
        from components.serving.command import server_command

        if importlib.util.find_spec("vllm") is None:
            raise InputError("vllm is not installed in this environment; use --engine ours or an image with vLLM")
        argv = server_command("vllm", str(model), port, host=host, served_model_name=served_model_name).argv
        os.execvp(sys.executable, [sys.executable, *argv[1:]])

    # Imported here so that `vcpilot --help` does not wait for torch, FastAPI and uvicorn.
    import uvicorn

    from components.serving.app import create_app
    from components.serving.engine import load_engine

    if device:
        _check_device(device)
    loaded = load_engine(model, device or None)  # a ModelLoadError ends as every VcpilotError does
    import torch  # already loaded by load_engine

    if loaded.device == "cpu":
        # One request decodes at a time: extra intra-op threads only contend with the HTTP loop and each other.
        torch.set_num_threads(cpu_threads)
    name = served_model_name or str(model)
    print(f"serving {name} on http://{host}:{port} ({loaded.device})", file=sys.stderr, flush=True)
    uvicorn.run(create_app(loaded, name), host=host, port=port, log_level="warning", access_log=access_log)


def _check_device(device: str) -> None:
    """InputError unless torch can place a model on `device` here: a known type, and a GPU that exists."""
    import torch

    try:
        chosen = torch.device(device)
    except RuntimeError:
        raise InputError(f"--device {device!r} is not a torch device; give cpu, cuda or cuda:N") from None
    if chosen.type == "cuda" and (chosen.index or 0) >= torch.cuda.device_count():
        raise InputError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA GPU(s); give cpu")


app = new_app()
app.command()(serve_command)
