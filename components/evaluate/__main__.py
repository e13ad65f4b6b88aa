"""`python -m components.evaluate --candidate DIR --report FILE …`: a first, minimal evaluator.

It scores the candidate (negative mean squared error of the tiny model on a held-out slice of its data stream)
and reports no champion. The evaluator of the step-programs issue (exact match, perplexity, the MLflow
registry's champion) replaces it behind the same report fields.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from components.finetune.tiny import batch, make_model


def main(argv: list[str] | None = None) -> int:
    """Run the command line; the exit code says whether it worked."""
    parser = argparse.ArgumentParser(prog="python -m components.evaluate")
    parser.add_argument("--candidate", type=Path, required=True)
    parser.add_argument("--base-model", default="tiny")
    parser.add_argument("--registered-model", default="")
    parser.add_argument("--report", type=Path, required=True)
    args = parser.parse_args(argv)
    if not (args.candidate / "model.pt").is_file():
        print(f"error: {args.candidate} holds no model.pt", file=sys.stderr)
        return 2
    model = make_model()
    model.load_state_dict(torch.load(args.candidate / "model.pt"))
    with torch.no_grad():
        losses = [float(torch.nn.functional.mse_loss(model(x), y)) for x, y in (batch(-i, 64) for i in range(1, 9))]
    report = {"candidate_score": -sum(losses) / len(losses), "champion_score": None, "metric": "neg_mse"}
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(report, indent=2))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
