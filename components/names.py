"""Kubernetes' names: object names (RFC 1123 labels and subdomains), label keys and values; one definition for all."""

from __future__ import annotations

import re

from components.errors import InputError

__all__ = [
    "MAX_RUN_NAME",
    "QUALIFIED_NAME",
    "check_label_key",
    "check_label_value",
    "check_labels",
    "check_namespace",
    "cut",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_port_name",
    "is_qualified_name",
    "run_name_problem",
]

# Patterns, not compiled ones: `re` compiles each on first use and keeps it, and a command that checks no name
# (`vcpilot cluster status`) does not pay for compiling them (benchmarks/cli.py).
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*"
# The name part of a label key, an annotation key or a resource name (apimachinery's IsQualifiedName), and the
# whole of a non-empty label value: at most 63 characters, alphanumerics at both ends, '-', '_' and '.' inside.
QUALIFIED_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"


def is_dns1123_label(value: str) -> bool:
    """Tell whether `value` is a lowercase RFC 1123 label: a-z, 0-9 and '-', at most 63 characters."""
    return len(value) <= 63 and re.fullmatch(_DNS1123_LABEL, value) is not None


def is_dns1123_subdomain(value: str) -> bool:
    """Tell whether `value` is a lowercase RFC 1123 subdomain: labels joined by '.', at most 253 long."""
    return len(value) <= 253 and re.fullmatch(_DNS1123_SUBDOMAIN, value) is not None


def cut(value: str, limit: int = 80) -> str:
    """`value` quoted in a sentence: whole up to `limit` characters, else its start and "..." (a name of 10,000)."""
    return value if len(value) <= limit else value[: limit - 3] + "..."


def check_namespace(value: str, what: str) -> str:
    """`value`, or InputError naming `what` (`--namespace`) when Kubernetes refuses it as a namespace: a DNS-1123 label.

    Checked where a namespace is typed, before anything asks a cluster: else a typo reads as "does not exist".
    """
    if not is_dns1123_label(value):
        raise InputError(
            f"{what} {cut(value)!r} is not a namespace name: give lower-case letters, digits and '-', at most 63 "
            "characters, starting and ending with a letter or digit"
        )
    return value


# Argo's controller refuses a longer workflow name (validate.go maxCharsInObjectName: it becomes a label value).
MAX_RUN_NAME = 63


def run_name_problem(name: str) -> str | None:
    """Why Argo would not take `name` as a workflow's name, in one sentence; None when it would.

    The one rule for run names, wherever one is given or read (run-workflow, run, resume, runs, plan --workflow): a
    DNS-1123 subdomain of at most 63 characters, so no name holds a '/' or '..' and reaches outside
    `VCPILOT_HOME/runs/`.
    """
    if len(name) <= MAX_RUN_NAME and is_dns1123_subdomain(name):
        return None
    return (
        f"{cut(name)!r} is not a run name: workflow names are lower-case letters, digits, '-' and '.', "
        f"at most {MAX_RUN_NAME} of them, starting and ending with a letter or digit (DNS-1123)."
    )


def is_port_name(value: str) -> bool:
    """Tell whether `value` names a port (an IANA service name): at most 15 of a-z, 0-9 and '-', one letter at least.

    apimachinery's IsValidPortName: no '--', no '-' at either end.
    """
    return (
        len(value) <= 15
        and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", value) is not None
        and re.search("[a-z]", value) is not None
    )


def is_qualified_name(value: str) -> bool:
    """Tell whether `value` is a label or annotation key: a qualified name with an optional DNS subdomain prefix."""
    prefix, slash, name = value.rpartition("/")
    if slash and not is_dns1123_subdomain(prefix):
        return False
    return re.fullmatch(QUALIFIED_NAME, name) is not None


def check_label_key(key: str) -> str:
    """Refuse a label, annotation or taint key the API server refuses, in one sentence."""
    if not is_qualified_name(key):
        raise ValueError(
            f"key {key!r} must be a name of at most 63 letters, digits, '-', '_' or '.', starting and ending "
            "with a letter or digit, optionally after a DNS prefix and '/' (example.com/my-name)"
        )
    return key


def check_label_value(value: str) -> str:
    """Refuse a label or taint value the API server refuses, in one sentence."""
    if value and re.fullmatch(QUALIFIED_NAME, value) is None:
        raise ValueError(
            f"value {value!r} must be empty or at most 63 letters, digits, '-', '_' or '.', starting and ending "
            "with a letter or digit"
        )
    return value


def check_labels(labels: dict[str, str] | None, *, values: bool = True) -> dict[str, str] | None:
    """Refuse what the API server refuses in labels (or, with `values=False`, annotation keys), in one sentence."""
    for key, value in (labels or {}).items():
        check_label_key(key)
        if values:
            check_label_value(value)
    return labels
