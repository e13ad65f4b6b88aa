"""A credential in a log line is masked in everything `vcpilot logs` writes: CSV rows, templates, state and reports.

Before, only the detect report and the fine-tuning set were masked: parse's Content, EventTemplate and
ParameterList columns, the template state and the window a run keeps for the next one held the secrets as written.
"""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

from components.logs.detect import detect
from components.logs.parse import parse_files

SECRETS = ("hunter2hunter2", "abcdefghijklmnop123", "sk-abcdefghijklmnopqrstuvwx", "s3cretpw", "shortpw", "AKIA")
LINES = [
    "2026-11-29 10:00:01 INFO login user=bob password=hunter2hunter2",
    "2026-11-29 10:00:02 INFO Authorization: Bearer abcdefghijklmnop123",
    "2026-11-29 10:00:03 INFO calling the model with key sk-abcdefghijklmnopqrstuvwx",
    "2026-11-29 10:00:04 WARN db postgres://admin:s3cretpw@db:5432/orders unreachable",
    "2026-11-29 10:00:05 INFO aws key AKIAABCDEFGHIJKLMNOP",
    json.dumps({"ts": "2026-11-29T10:00:06Z", "level": "error", "msg": "login failed password=hunter2hunter2"}),
    json.dumps({"ts": "2026-11-29T10:00:07Z", "user": "bob", "password": "shortpw"}),  # no message: its fields
]


def _written(folder: Path) -> str:
    """Every file under `folder` as text, a Drain3 state (base64 of zlib) unpacked."""
    texts = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".drain3":
            data = zlib.decompress(base64.b64decode(data))
        texts.append(data.decode("utf-8"))
    return "\n".join(texts)


def test_no_output_of_parse_or_detect_holds_a_credential(tmp_path: Path) -> None:
    source = tmp_path / "app.log"
    source.write_text("\n".join(LINES) + "\n")
    baseline = tmp_path / "baseline.log"
    baseline.write_text("2026-11-28 10:00:01 INFO login user=bob\n")
    out = tmp_path / "out"
    parse_files([source], out / "parsed.csv", state_file=out / "parse.drain3")
    detect([source], out / "detect" / "report.json", baseline=[baseline], state_dir=out / "state")
    written = _written(out)
    assert "password=***" in written and "Bearer ***" in written and "postgres://admin:***@db" in written
    assert [secret for secret in SECRETS if secret in written] == []
