"""The server container's command per engine, and `python -m components.serving` refusing bad input."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from components.serving.cli import app
from components.serving.command import server_command


def test_ours_and_vllm_commands_serve_the_same_model_on_the_same_port():
    ours = server_command("ours", "/ws/model", 8000)
    assert ours.argv[:3] == ["python", "-m", "components.serving"]
    assert ours.args == ["--model", "/ws/model", "--port", "8000", "--host", "0.0.0.0"]
    vllm = server_command("vllm", "/ws/model", 8000, served_model_name="candidate")
    assert vllm.module == "vllm.entrypoints.openai.api_server"
    assert vllm.args == [*ours.args, "--served-model-name", "candidate"]
    with pytest.raises(ValueError, match="unknown serving engine 'tgi'"):
        server_command("tgi", "/m", 1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (["--model", "/nonexistent/model"], 1, "model directory /nonexistent/model does not exist"),
        (["--model", "{tmp}"], 1, "holds no config.json"),
        (["--model", "{tmp}/job.yaml"], 1, "job.yaml is a file, not a model directory"),  # said "does not exist"
        (["--model", "{tmp}", "--port", "0"], 1, "--port 0 is not a TCP port"),
        # Not one of the choices: a usage error, like a value of the wrong type.
        (["--model", "{tmp}", "--engine", "tgi"], 2, "invalid --engine ('tgi' is not one of 'ours', 'vllm')"),
    ],
)
def test_serve_rejects_bad_input_in_one_sentence(tmp_path, args, code, fragment):
    (tmp_path / "job.yaml").write_text("x: 1")
    result = CliRunner().invoke(app, [a.replace("{tmp}", str(tmp_path)) for a in args])
    assert result.exit_code == code
    text = result.stderr.strip()
    assert text.count("\n") == 0 and fragment in text, text
