"""The errors every Argo expression dialect raises, so callers catch one type whatever the dialect."""

from __future__ import annotations

__all__ = ["ExpressionError", "Unsupported", "UnresolvedVariable", "quote_expression"]

_MAX_SHOWN = 160


class ExpressionError(ValueError):
    """An expression is malformed or cannot be evaluated; the message is one sentence naming it."""

    def __init__(self, message: str) -> None:
        # One line whatever the expression held: messages end up in node status and CLI output.
        super().__init__(" ".join(message.split()))


class Unsupported(ExpressionError):
    """An expression calls what local runs refuse (the clock, randomness, the host): never left as written."""


class UnresolvedVariable(ExpressionError):
    """A `{{...}}` tag or an expression names a variable that the scope does not (yet) hold."""

    def __init__(self, variable: str, message: str | None = None) -> None:
        self.variable = variable
        super().__init__(message or f"unable to resolve {{{{{variable}}}}}")


def quote_expression(expression: str) -> str:
    """The expression as shown inside an error message: backquoted, on one line, shortened when long."""
    shown = " ".join(expression.split())
    if len(shown) > _MAX_SHOWN:
        shown = shown[: _MAX_SHOWN - 1] + "…"
    return f"`{shown}`"
