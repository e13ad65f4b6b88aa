"""govaluate's lexer and syntax check (parsing.go, lexerState.go), as Argo's `when` goes through them."""

from __future__ import annotations

import math
import re
import unicodedata
from datetime import UTC, datetime
from typing import Any

from pipelines.local.expressions.errors import ExpressionError
from pipelines.local.expressions.goregexp import RegexpError, compile_go
from pipelines.local.govalues import format_float_g

__all__ = ["COMPARATOR_OPS", "TERNARY_OPS", "Token", "check_syntax", "compile_patterns", "tokenize"]

_PREFIX_OPS = {"-", "!", "~"}
_MODIFIER_OPS = {"+", "-", "*", "/", "%", "**", "&", "|", "^", ">>", "<<"}
_LOGICAL_OPS = {"&&", "||"}
COMPARATOR_OPS = {"==", "!=", ">", ">=", "<", "<=", "=~", "!~", "in"}
TERNARY_OPS = {"?", ":", "??"}

# Which token kind may follow which (govaluate's lexerState.go); None is the start of the expression.
_OPERANDS = frozenset({"PREFIX", "NUMERIC", "BOOLEAN", "VARIABLE", "PATTERN", "FUNCTION", "ACCESSOR", "STRING", "TIME"})
_AFTER_VALUE = frozenset({"MODIFIER", "COMPARATOR", "LOGICALOP", "CLAUSE_CLOSE", "TERNARY", "SEPARATOR"})
_NEXT: dict[str | None, frozenset[str]] = {
    None: _OPERANDS | {"CLAUSE"},
    "CLAUSE": _OPERANDS | {"CLAUSE", "CLAUSE_CLOSE"},
    "CLAUSE_CLOSE": (_AFTER_VALUE | _OPERANDS | {"CLAUSE"}) - {"PREFIX", "FUNCTION", "ACCESSOR"},
    "NUMERIC": _AFTER_VALUE,
    "BOOLEAN": _AFTER_VALUE,
    "STRING": _AFTER_VALUE,
    "VARIABLE": _AFTER_VALUE,
    "TIME": _AFTER_VALUE - {"TERNARY"},
    "PATTERN": _AFTER_VALUE - {"TERNARY"},
    "MODIFIER": (_OPERANDS - {"PATTERN", "TIME"}) | {"CLAUSE", "CLAUSE_CLOSE"},
    "COMPARATOR": _OPERANDS | {"CLAUSE", "CLAUSE_CLOSE"},
    "LOGICALOP": (_OPERANDS - {"PATTERN"}) | {"CLAUSE", "CLAUSE_CLOSE"},
    "PREFIX": frozenset({"NUMERIC", "BOOLEAN", "VARIABLE", "FUNCTION", "ACCESSOR", "CLAUSE", "CLAUSE_CLOSE"}),
    "TERNARY": (_OPERANDS - {"PATTERN"}) | {"CLAUSE", "SEPARATOR"},
    "FUNCTION": frozenset({"CLAUSE"}),
    "ACCESSOR": _AFTER_VALUE | {"CLAUSE"},
    "SEPARATOR": (_OPERANDS - {"PATTERN"}) | {"CLAUSE"},
}
_CAN_END = frozenset({"CLAUSE_CLOSE", "NUMERIC", "BOOLEAN", "STRING", "TIME", "PATTERN", "VARIABLE", "ACCESSOR"})

# The date layouts govaluate tries on every quoted string (parsing.go, tryParseTime), as regexes.
_TIME_LAYOUTS = [
    (re.compile(r"\d{4}-\d{2}-\d{2}"), "%Y-%m-%d"),
    (re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}"), "%Y-%m-%d %H:%M"),
    (re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"), "%Y-%m-%d %H:%M:%S"),
    (re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}"), "%Y-%m-%d %H:%M:%S%z"),
    (re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})"), "iso"),
    (re.compile(r"(1[0-2]|0?[1-9]):[0-5]\d[AP]M"), "%I:%M%p"),
]


class Token:
    """One govaluate token: its kind (NUMERIC, STRING, VARIABLE, COMPARATOR...) and value."""

    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value: Any) -> None:
        self.kind = kind
        self.value = value

    def shown(self) -> str:
        """The value as govaluate prints it in messages."""
        value = self.value
        if isinstance(value, list):
            return ".".join(value)
        return format_float_g(value) if isinstance(value, float) else str(value)


class _Stream:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def can_read(self) -> bool:
        return self.pos < len(self.text)

    def read(self) -> str:
        if self.pos >= len(self.text):
            raise ExpressionError("unexpected end of expression after a backslash")
        char = self.text[self.pos]
        self.pos += 1
        return char

    def read_until_false(self, include_space: bool, break_space: bool, condition: Any) -> tuple[str, bool]:
        """Govaluate's readUntilFalse: backslash escapes anything; returns the text and whether it ended cleanly."""
        buffer: list[str] = []
        while self.can_read():
            char = self.read()
            if char == "\\":
                buffer.append(self.read())
                continue
            if char.isspace():
                if break_space and buffer:
                    return "".join(buffer), True
                if not include_space:
                    continue
            if condition(char):
                buffer.append(char)
            else:
                self.pos -= 1
                return "".join(buffer), True
        return "".join(buffer), False


def _is_numeric(char: str) -> bool:
    return char == "." or unicodedata.category(char) == "Nd"


def _is_variable_char(char: str) -> bool:
    return char.isalpha() or unicodedata.category(char) == "Nd" or char in "_."


def _is_symbol_char(char: str) -> bool:
    return not (char.isalpha() or unicodedata.category(char) == "Nd" or char in "()[]'\"")


def _parse_time(text: str) -> float | None:
    for pattern, layout in _TIME_LAYOUTS:
        if not pattern.fullmatch(text):
            continue
        try:
            if layout == "iso":
                moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            else:
                moment = datetime.strptime(text, layout)
        except ValueError:
            continue
        # Argo's controller runs in UTC: naive layouts are read as UTC so the result never depends on this host.
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return float(math.floor(moment.timestamp()))
    return None


def _read_token(stream: _Stream, previous: str | None) -> Token | None:
    while stream.can_read():
        char = stream.read()
        if char.isspace():
            continue
        if _is_numeric(char):
            if char == "0" and stream.can_read():
                following = stream.read()
                if following == "x" and stream.can_read():
                    digits, _ = stream.read_until_false(False, True, lambda c: c in "0123456789abcdefABCDEF")
                    try:
                        return Token("NUMERIC", float(int(digits, 16)))
                    except ValueError:
                        raise ExpressionError(f"unable to parse hex value '{digits}'") from None
                stream.pos -= 1
            stream.pos -= 1
            text, _ = stream.read_until_false(False, True, _is_numeric)
            try:
                if text.count(".") > 1 or text == ".":
                    raise ValueError(text)
                return Token("NUMERIC", float(text))
            except ValueError:
                raise ExpressionError(f"unable to parse numeric value '{text}' to float64") from None
        if char == ",":
            return Token("SEPARATOR", ",")
        if char == "[":
            name, closed = stream.read_until_false(True, False, lambda c: c != "]")
            if not closed:
                raise ExpressionError("unclosed parameter bracket")
            stream.pos += 1
            return Token("VARIABLE", name)
        if char.isalpha():
            stream.pos -= 1
            word, _ = stream.read_until_false(False, True, _is_variable_char)
            if word in ("true", "false"):
                return Token("BOOLEAN", word == "true")
            if word in ("in", "IN"):
                return Token("COMPARATOR", "in")
            if word.find(".") > 0:
                if word.endswith("."):
                    raise ExpressionError(f"hanging accessor on token '{word}'")
                for part in word.split(".")[1:]:
                    if part[:1].upper() != part[:1]:
                        raise ExpressionError(f"unable to access unexported field '{part}' in token '{word}'")
                return Token("ACCESSOR", word.split("."))
            return Token("VARIABLE", word)
        if char in "'\"":
            text, closed = stream.read_until_false(True, False, lambda c: c not in "'\"")
            if not closed:
                raise ExpressionError("unclosed string literal")
            stream.pos += 1
            moment = _parse_time(text)
            return Token("STRING", text) if moment is None else Token("TIME", moment)
        if char == "(":
            return Token("CLAUSE", "(")
        if char == ")":
            return Token("CLAUSE_CLOSE", ")")
        stream.pos -= 1
        symbol, _ = stream.read_until_false(False, True, _is_symbol_char)
        if symbol in _PREFIX_OPS and "PREFIX" in _NEXT[previous]:
            return Token("PREFIX", symbol)
        for kind, symbols in (
            ("MODIFIER", _MODIFIER_OPS),
            ("LOGICALOP", _LOGICAL_OPS),
            ("COMPARATOR", COMPARATOR_OPS),
            ("TERNARY", TERNARY_OPS),
        ):
            if symbol in symbols:
                return Token(kind, symbol)
        raise ExpressionError(f"Invalid token: '{symbol}' (hint: quote operands that contain spaces or symbols)")
    return None


def check_syntax(tokens: list[Token]) -> None:
    """Balanced parentheses, and only the token sequences govaluate's lexer states allow."""
    if not tokens:
        raise ExpressionError("unexpected end of expression")
    depth = 0
    for token in tokens:
        depth += {"CLAUSE": 1, "CLAUSE_CLOSE": -1}.get(token.kind, 0)
    if depth != 0:
        raise ExpressionError("unbalanced parenthesis")
    previous: Token | None = None
    for token in tokens:
        if token.kind not in _NEXT[previous.kind if previous else None]:
            if previous is not None and previous.kind == "VARIABLE" and token.kind == "CLAUSE":
                raise ExpressionError(f"undefined function {previous.value}")
            before = f"{previous.kind} [{previous.shown()}]" if previous else "the start"
            raise ExpressionError(f"cannot transition token types from {before} to {token.kind} [{token.shown()}]")
        previous = token
    if previous is not None and previous.kind not in _CAN_END:
        raise ExpressionError("unexpected end of expression")


def compile_patterns(tokens: list[Token]) -> None:
    """Turn the string after `=~` / `!~` into a compiled pattern, as govaluate's optimizeTokens does."""
    for index, token in enumerate(tokens[:-1]):
        following = tokens[index + 1]
        if token.kind == "COMPARATOR" and token.value in ("=~", "!~") and following.kind == "STRING":
            try:
                tokens[index + 1] = Token("PATTERN", compile_go(following.value))
            except RegexpError as error:
                raise ExpressionError(f"unable to compile regexp pattern '{following.value}': {error}") from None


def tokenize(text: str) -> list[Token]:
    """Govaluate's parseTokens: the tokens of `text`, before any syntax check."""
    stream = _Stream(text)
    tokens: list[Token] = []
    while (token := _read_token(stream, tokens[-1].kind if tokens else None)) is not None:
        tokens.append(token)
    return tokens
