"""The workspace every step shares (a PVC in the cluster, a directory locally): its layout, and reading it.

Files travel through the workspace, metrics through MLflow. The step programs in `components/` write the
reports modelled in `pipelines.rules` at the paths below; the pipeline's steps read them back here, and write
their own records with the same atomic writer as the components (`components.files.write_json`).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from components.errors import InputError
from components.files import read_text
from components.volcano.validation import describe_validation_error

__all__ = ["RunPaths", "check_resume_checkpoint", "check_workspace", "read_report"]

_M = TypeVar("_M", bound=BaseModel)


def check_workspace(value: str, what: str) -> None:
    """ValueError unless `value` is an absolute path: every step's pod mounts the workspace there and reads it."""
    if not value.startswith("/"):
        raise ValueError(f"{what} is {value!r}; give the absolute path the workspace is mounted at, such as /workspace")


def check_resume_checkpoint(value: str, what: str) -> None:
    """ValueError unless `value` is empty (from scratch) or the absolute path of a checkpoint directory, …/step-N."""
    if value and not re.fullmatch(r"/.*/step-\d+", value, re.ASCII):
        raise ValueError(f"{what} is {value!r}; give the absolute path of a checkpoint directory, …/step-N")


class RunPaths(BaseModel):
    """Where each step reads and writes in the workspace (a PVC in the cluster, a directory locally)."""

    model_config = ConfigDict(frozen=True)

    workspace: str
    workflow: str

    @property
    def run(self) -> PurePosixPath:
        """The directory of this workflow run."""
        return PurePosixPath(self.workspace) / "runs" / self.workflow

    @property
    def detect_report(self) -> str:
        """The drift report that detect-logs writes and gate reads."""
        return str(self.run / "detect" / "report.json")

    @property
    def checkpoints(self) -> str:
        """Checkpoints shared by every training attempt, so that a retry resumes where the last one stopped."""
        return str(self.run / "checkpoints")

    def model(self, attempt: int) -> str:
        """Where training attempt `attempt` writes the fine-tuned model."""
        return str(self.run / f"train-{attempt}" / "model")

    @property
    def loadtest_report(self) -> str:
        """Latency percentiles that the loadtest client writes and release reads."""
        return str(self.run / "loadtest" / "report.json")

    @property
    def evaluate_report(self) -> str:
        """Candidate and champion scores that evaluate writes and release reads."""
        return str(self.run / "evaluate" / "report.json")

    @property
    def release_record(self) -> str:
        """What release decided and why."""
        return str(self.run / "release.json")

    @property
    def tracking(self) -> str:
        """The run's MLflow spools, one per pod (components/tracking/spool.py), which the exit handler sends."""
        return str(self.run / "tracking")

    @property
    def summary(self) -> str:
        """The run summary that the exit handler writes."""
        return str(self.run / "summary.json")


def read_report(path: str, model: type[_M], what: str) -> _M:
    """Read a step's JSON report; InputError says in one sentence what is missing or wrong."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"the {what} report {path} does not exist; the {what} step did not write it")
    try:
        return model.model_validate_json(read_text(file, f"{what} report"))
    except ValidationError as err:
        raise InputError(f"the {what} report {path} is not valid: {describe_validation_error(err, model)}") from None
