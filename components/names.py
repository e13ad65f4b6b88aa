"""Kubernetes' object names (RFC 1123 labels and subdomains): one definition for jobs, queues, nodes and runs."""

from __future__ import annotations

import re

__all__ = ["is_dns1123_label", "is_dns1123_subdomain"]

# Patterns, not compiled ones: `re` compiles each on first use and keeps it, and a command that checks no name
# (`vcpilot cluster status`) does not pay for compiling them (benchmarks/cli.py).
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*"


def is_dns1123_label(value: str) -> bool:
    """Tell whether `value` is a lowercase RFC 1123 label: a-z, 0-9 and '-', at most 63 characters."""
    return len(value) <= 63 and re.fullmatch(_DNS1123_LABEL, value) is not None


def is_dns1123_subdomain(value: str) -> bool:
    """Tell whether `value` is a lowercase RFC 1123 subdomain: labels joined by '.', at most 253 long."""
    return len(value) <= 253 and re.fullmatch(_DNS1123_SUBDOMAIN, value) is not None
