r"""Go's regexp for the expression dialects (expr's `matches`, sprig's `regex*`, govaluate's `=~`): RE2.

Go's regexp is RE2: it runs in time linear in the text, whatever the pattern, and its syntax and meaning differ
from Python's `re` where a workflow would notice. Python's engine backtracked for minutes on `(a+)+$` against 40
a's and a `!`, took lookarounds and backreferences Go refuses, matched `\w` and `\d` on any Unicode letter or digit
(Go: ASCII only) and `$` before a final line break (Go: at the end of the text only). google-re2 is the same
engine, so the workflow's pattern means here what it means in Argo.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

__all__ = ["GoRegexp", "RegexpError", "compile_go"]


class RegexpError(ValueError):
    """A pattern Go's regexp refuses; the message is RE2's reason."""


class GoRegexp:
    """A compiled pattern: its `pattern`, and RE2's `re`-like search, finditer, sub and split."""

    def __init__(self, pattern: str, compiled: Any) -> None:
        self.pattern = pattern
        self._compiled = compiled

    def __getattr__(self, name: str) -> Any:
        return getattr(self._compiled, name)


@lru_cache(maxsize=256)
def compile_go(pattern: str) -> GoRegexp:
    """`pattern` compiled as Go's regexp.Compile reads it (a `re`-like object: search, finditer, sub, split)."""
    import re2  # imported here: only a workflow with a regular expression needs it

    options = re2.Options()
    options.log_errors = False  # RE2 logs each refused pattern on stderr; the caller says it in one sentence
    try:
        return GoRegexp(pattern, re2.compile(pattern, options=options))
    except re2.error as error:
        reason = error.args[0] if error.args else "invalid pattern"
        raise RegexpError(reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)) from None
