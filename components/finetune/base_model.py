"""What a base model may be named: 'tiny', a model directory, or a Hugging Face Hub id — checked before a run starts.

The Hub's rule is huggingface_hub's `validate_repo_id` (transformers' `from_pretrained` asks it of any name that is
not a directory): `name` or `namespace/name`, each letters, digits, '-', '_' and '.', starting and ending with a
letter, digit or '_', each at most 96 characters, no '--' or '..', not ending in '.git'. Written out here, not
imported, so that `vcpilot plan` does not import huggingface_hub; tests/unit/finetune/test_base_model.py holds it
to the real one.
"""

from __future__ import annotations

import re

__all__ = ["TINY", "check_base_model", "is_hub_id"]

TINY = "tiny"  # the bundled char-level model: no download, no directory
_HUB_PART = r"[A-Za-z0-9_](?:[-A-Za-z0-9_.]*[A-Za-z0-9_])?"
_HUB_ID = rf"(?:(?=[^/]{{1,96}}/){_HUB_PART}/)?(?=[^/]{{1,96}}$){_HUB_PART}"


def is_hub_id(value: str) -> bool:
    """Tell whether `value` is a Hugging Face Hub model id by the Hub's own rule."""
    return (
        re.fullmatch(_HUB_ID, value) is not None
        and "--" not in value
        and ".." not in value
        and not value.endswith(".git")
    )


def check_base_model(value: str, what: str) -> str:
    """Refuse a base model that is neither 'tiny', a path ('/...' or './...') nor a Hub id, in one sentence.

    A path is taken as it is: it names a directory where the training runs (a pod's volume), whose step says so
    when it is not a model there.
    """
    if value == TINY or value.startswith(("/", "./", "../")) or is_hub_id(value):
        return value
    raise ValueError(
        f"{what} {value!r} is not a model: give 'tiny', a model directory as a path ('/models/m' or './m'), or a "
        "Hugging Face id ('org/name': letters, digits, '-', '_' and '.')"
    )
