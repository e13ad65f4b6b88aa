"""`python -m components.release --model DIR --registered-model NAME --report FILE …`: the pipeline's release.

It registers the model directory as a new version with its lineage (the workflow from VCPILOT_WORKFLOW, MLflow
from MLFLOW_TRACKING_URI and MLFLOW_EXPERIMENT_NAME), promotes it to `champion` unless `--no-promote`, writes
what it did to the report and prints it as one JSON line. Bad input or an unreachable MLflow: one sentence on
stderr, exit code 2, no report.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from components.release.cli import register_model
from components.release.registry import RegistryError


def main(argv: list[str] | None = None) -> int:
    """Run the command line; the exit code says whether it worked."""
    parser = argparse.ArgumentParser(prog="python -m components.release", description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="the model directory to register")
    parser.add_argument("--registered-model", required=True, help="the MLflow registered model")
    parser.add_argument("--report", type=Path, required=True, help="where to write what was registered (JSON)")
    parser.add_argument("--dataset", type=Path, help="the training set (file, or directory with train.jsonl)")
    parser.add_argument("--base-model", default="")
    parser.add_argument("--checkpoint", default="")
    parser.add_argument("--metrics", type=Path, help="a JSON report whose numbers become metrics (evaluate's)")
    parser.add_argument("--workflow", default="", help="default: $VCPILOT_WORKFLOW")
    parser.add_argument("--experiment", default="", help="default: $MLFLOW_EXPERIMENT_NAME or llm-autopilot")
    parser.add_argument("--no-promote", action="store_true", help="register without moving the aliases")
    parser.add_argument("--tracking-uri", default="", help="default: $MLFLOW_TRACKING_URI")
    args = parser.parse_args(argv)
    try:
        done = register_model(
            args.model,
            args.registered_model,
            dataset=args.dataset,
            base_model=args.base_model,
            checkpoint=args.checkpoint,
            metrics=args.metrics,
            workflow=args.workflow,
            experiment=args.experiment,
            promote=not args.no_promote,
            tracking_uri=args.tracking_uri,
        )
    except (ValueError, RegistryError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    args.report.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.report.with_name(args.report.name + ".tmp")
    tmp.write_text(done.model_dump_json(indent=2) + "\n")
    os.replace(tmp, args.report)
    print(done.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
