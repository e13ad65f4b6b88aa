"""Which stored files hold a secret, read in another process.

A test that holds a LocalCluster's SQLite connection must not open and close that database's files itself: closing
any descriptor of a file drops every POSIX lock this process holds on it, the connection's too. A pod's reconcile
hook then takes the database for unused and resets the WAL index the connection has mapped, and the connection's
next query dies of SIGBUS (a `make test` of 2026-12-07 lost a worker so). A child process has no locks to drop.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_SCAN = """
import json, pathlib, sys
root, needles = pathlib.Path(sys.argv[1]), [n.encode() for n in sys.argv[2:]]
files = [p for p in sorted(root.rglob("*")) if p.is_file()]
holding = [str(p) for p in files if any(n in p.read_bytes() for n in needles)]
print(json.dumps({"files": len(files), "holding": holding}))
"""


def files_holding(root: Path, *needles: str) -> tuple[int, list[str]]:
    """(how many files are under `root`, those that hold any of `needles`), every byte read by a child process."""
    done = subprocess.run([sys.executable, "-c", _SCAN, str(root), *needles], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    return found["files"], found["holding"]
