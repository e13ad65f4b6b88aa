"""A run that fails says, at its end, which step failed, why (the last line of its output) and where its log is."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from components.errors import EXIT_FAILED
from pipelines.cli import app

FAILING = """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: fails}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: check, template: check}
  - name: check
    container:
      image: busybox
      command:
      - sh
      - -c
      - "echo looking; echo 'parameter gpus is abc, which is not a whole number' >&2; sleep 0.2; echo done; exit 3"
"""


def test_the_final_message_names_the_failed_steps_reason_and_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VCPILOT_HOME", str(tmp_path / "home"))
    workflow = tmp_path / "fails.yaml"
    workflow.write_text(FAILING)
    result = CliRunner().invoke(app, ["run-workflow", str(workflow)])
    assert result.exit_code == EXIT_FAILED, result.output
    out = " ".join(result.stdout.split())  # rich wraps long lines
    assert "check (check) Failed: parameter gpus is abc, which is not a whole number" in out
    log = tmp_path / "home" / "runs" / "fails" / "nodes"
    assert f"log: {log}" in out and "main.log" in out
