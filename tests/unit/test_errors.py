"""Every error of ours is one line, whatever its sentence quotes from a file, a command line or a server."""

from __future__ import annotations

import pytest

from components.errors import InputError, Unavailable, VcpilotError, explain
from pipelines.local.workflow import WorkflowError, load_workflow


@pytest.mark.parametrize("kind", [VcpilotError, InputError, Unavailable, WorkflowError])
def test_a_newline_or_carriage_return_quoted_in_a_sentence_reads_as_its_escape(kind: type[VcpilotError]) -> None:
    err = kind("the file is a \n, not a Workflow\r")
    assert str(err) == "the file is a \\n, not a Workflow\\r"
    assert explain(err)[0] == "the file is a \\n, not a Workflow\\r"


def test_a_workflow_whose_kind_holds_a_newline_is_refused_in_one_line(tmp_path) -> None:
    # found by `make fuzz` (10,000 examples): `kind: "\n"` made "… is a <newline>, not a Workflow …" two lines
    path = tmp_path / "wf.yaml"
    path.write_text('apiVersion: argoproj.io/v1alpha1\nkind: "\\n"\nmetadata: {generateName: x-}\nspec: {}\n')
    with pytest.raises(WorkflowError) as caught:
        load_workflow(path)
    assert str(caught.value) == (
        f"{path} is a \\n, not a Workflow, WorkflowTemplate, ClusterWorkflowTemplate or CronWorkflow."
    )
