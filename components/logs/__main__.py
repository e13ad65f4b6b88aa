"""`python -m components.logs --source PATH --report FILE`: a first, minimal drift detector.

It counts error lines (and request records with a 5xx status or negative feedback) in the log source and
reports drift when their share passes a threshold. The Drain3-based detector of the step-programs issue
replaces it behind the same command line and report fields (`drift`, `reason`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

_ERROR = re.compile(r"\b(ERROR|FATAL|Exception|Traceback)\b")


def _lines(source: Path) -> Iterator[str]:
    files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
    for file in files:
        opener = gzip.open if file.suffix == ".gz" else open
        with opener(file, "rt", encoding="utf-8", errors="replace") as handle:
            yield from handle


def _is_bad(line: str) -> bool:
    if line.lstrip().startswith("{"):
        try:
            record = json.loads(line)
        except ValueError:
            return False
        return int(record.get("status", 200)) >= 500 or record.get("feedback") == "negative"
    return bool(_ERROR.search(line))


def main(argv: list[str] | None = None) -> int:
    """Run the command line; the exit code says whether it worked."""
    parser = argparse.ArgumentParser(prog="python -m components.logs")
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--threshold", type=float, default=0.05)
    args = parser.parse_args(argv)
    if not args.source.exists():
        print(f"error: log source {args.source} does not exist", file=sys.stderr)
        return 2
    total = bad = 0
    for line in _lines(args.source):
        total += 1
        bad += _is_bad(line)
    share = bad / total if total else 0.0
    drift = total > 0 and share > args.threshold
    reason = f"{bad} of {total} log lines are errors or negative feedback ({share:.1%}, threshold {args.threshold:.0%})"
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps({"drift": drift, "reason": reason, "lines": total, "bad": bad}, indent=2))
    print(reason)
    return 0


if __name__ == "__main__":
    sys.exit(main())
