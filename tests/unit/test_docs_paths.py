"""The docs name files and functions a newcomer will look for: each must exist, so a move updates the docs too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
# A repository path in backticks: a top-level folder of the project, then a file or folder of it.
PATH = re.compile(r"`((?:pipelines|components|agent|deploy|benchmarks|tests)/[\w./-]*\w/?)`")
# In docs/trace.md a table row names a file, then a function of that file: `file` | `function`.
ROW = re.compile(r"^\| \d+ \| `([\w/.]+\.py)`[^|]*\| `([\w.]+)`")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_a_doc_names_exists(doc: Path) -> None:
    missing = sorted({p for p in PATH.findall(doc.read_text()) if "*" not in p and not (ROOT / p).exists()})
    assert not missing, f"{doc.name} names files that do not exist: {', '.join(missing)}"


def test_the_trace_names_functions_that_are_in_its_files() -> None:
    missing = []
    for line in (ROOT / "docs" / "trace.md").read_text().splitlines():
        if match := ROW.match(line):
            path, name = match.groups()
            defined = rf"^\s*(?:(?:def|class) {re.escape(name.split('.')[-1])}\b|{re.escape(name)}\s*=)"
            if not re.search(defined, (ROOT / path).read_text(), re.M):
                missing.append(f"{name} in {path}")
    assert not missing, f"docs/trace.md names what its files do not define: {', '.join(missing)}"
