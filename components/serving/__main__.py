"""`python -m components.serving --model DIR --port N`: a first, minimal OpenAI-compatible server.

It answers `/health` and non-streaming `/v1/completions` with the tiny model's prediction rendered as text.
The FastAPI server (streaming, chat completions, transformers models) of the step-programs issue replaces it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import torch

from components.finetune.tiny import make_model


def main(argv: list[str] | None = None) -> int:
    """Run the command line; the exit code says whether it worked."""
    parser = argparse.ArgumentParser(prog="python -m components.serving")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    if not (args.model / "model.pt").is_file():
        print(f"error: {args.model} holds no model.pt", file=sys.stderr)
        return 2
    model = make_model()
    model.load_state_dict(torch.load(args.model / "model.pt"))
    model.eval()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def _send(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send(200, {"status": "ok"} if self.path == "/health" else {"error": "not found"})

        def do_POST(self) -> None:
            if self.path != "/v1/completions":
                self._send(404, {"error": "not found"})
                return
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            seed = sum(map(ord, str(request.get("prompt", ""))))
            with torch.no_grad():
                value = float(model(torch.randn(1, 8, generator=torch.Generator().manual_seed(seed))))
            text = f" {value:.4f}"
            self._send(
                200,
                {
                    "id": f"cmpl-{seed}",
                    "object": "text_completion",
                    "created": int(time.time()),
                    "choices": [{"index": 0, "text": text, "finish_reason": "stop"}],
                    "usage": {"completion_tokens": len(text.split())},
                },
            )

    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
