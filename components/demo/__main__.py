"""`python -m components.demo --out DIR [--seed N]`: the demo's data, for a pod or a Makefile without the CLI."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from components.demo.cli import make_demo


def main(argv: list[str] | None = None) -> int:
    """Generate the demo data and print its summary as JSON; the exit code says whether it worked."""
    parser = argparse.ArgumentParser(prog="python -m components.demo", description=__doc__)
    parser.add_argument("--out", type=Path, required=True, help="directory to write logs/, data/ and demo.json into")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--items", type=int, default=48)
    parser.add_argument("--new-items", type=int, default=12)
    parser.add_argument("--changed-share", type=float, default=0.5)
    parser.add_argument("--requests", type=int, default=600)
    args = parser.parse_args(argv)
    try:
        summary = make_demo(
            args.out,
            seed=args.seed,
            items=args.items,
            new_items=args.new_items,
            changed_share=args.changed_share,
            requests=args.requests,
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(summary.model_dump(mode="json")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
