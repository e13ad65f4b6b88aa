"""Container image references: what a container runtime pulls, checked before a pod that could not start is made."""

from __future__ import annotations

import re

from components.names import cut

__all__ = ["check_image", "is_image_reference"]

# A container image reference as containerd parses it (the distribution reference grammar, loosely): an optional
# registry host[:port]/, a lowercase path, an optional :tag and an optional @algorithm:hex digest; ASCII only.
_HOST_PART = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_IMAGE_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
_IMAGE = (
    rf"(?:(?:{_HOST_PART}(?:\.{_HOST_PART})*(?::\d+)?|\[[0-9A-Fa-f:]+\](?::\d+)?)/)?{_IMAGE_PATH}"
    r"(?::\w[\w.-]{0,127})?(?:@[a-z0-9]+(?:[+._-][a-z0-9]+)*:[0-9a-fA-F]{32,})?"
)


def is_image_reference(value: str) -> bool:
    """Tell whether `value` is an image reference a container runtime pulls (`registry:5000/team/app:v1`).

    The API server takes any image without surrounding spaces; containerd refuses the rest at pull time, when the
    pod is already scheduled: spaces, an uppercase repository path, a bad tag or digest.
    """
    first, slash, _ = value.partition("/")
    host = slash and ("." in first or ":" in first or first == "localhost" or first.startswith("["))
    if slash and not host and first.lower() != first:
        return False  # not a registry host, so part of the lowercase path
    return len(value) <= 512 and re.fullmatch(_IMAGE, value, re.ASCII) is not None


def check_image(value: str, where: str) -> str:
    """Refuse, in one sentence naming `where` (`--image`), an image reference a container runtime cannot pull."""
    if not is_image_reference(value):
        raise ValueError(
            f"{where} is {cut(value)!r}, which is not an image reference a container runtime pulls: "
            "[registry/]lowercase/path[:tag][@digest], without spaces"
        )
    return value
