"""The lexer of expr-lang (parser/lexer in github.com/expr-lang/expr): numbers, strings, names and operators."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipelines.local.expressions.errors import ExpressionError

__all__ = ["KEYWORDS", "Token", "tokenize"]

KEYWORDS = {"not", "in", "or", "and", "matches", "contains", "startsWith", "endsWith", "let", "if", "else"}
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"'}
_NUMBER = re.compile(r"0[xX][0-9a-fA-F_]*|0[oO][0-7_]*|0[bB][01_]*|[0-9_]*(\.(?!\.)[0-9_]*)?([eE][+-]?[0-9_]*)?")


@dataclass(frozen=True, slots=True)
class Token:
    """One lexeme, with its 1-based column for error messages."""

    kind: str  # number, string, ident, op, bracket, eof
    value: str
    column: int

    def is_(self, kind: str, *values: str) -> bool:
        """Whether the token has this kind and, when values are given, one of them."""
        return self.kind == kind and (not values or self.value in values)

    def __str__(self) -> str:
        return "end of expression" if self.kind == "eof" else f"{self.value!r}"


def _is_alnum(char: str) -> bool:
    return char.isalnum() or char in "_$"


def _unescape(body: str, column: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        code = body[i + 1 : i + 2]
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            i += 2
        elif code in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[code]
            digits = body[i + 2 : i + 2 + width]
            if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ExpressionError(f"invalid escape sequence at column {column + i}")
            out.append(chr(int(digits, 16)))
            i += 2 + width
        elif code[:1].isdigit() and re.fullmatch(r"[0-7]{3}", body[i + 1 : i + 4]):
            out.append(chr(int(body[i + 1 : i + 4], 8)))
            i += 4
        else:
            raise ExpressionError(f"invalid escape sequence at column {column + i}")
    return "".join(out)


def tokenize(source: str) -> list[Token]:  # noqa: C901 - one branch per lexer state, as in expr's state.go
    """Split an expression into tokens, ending with an "eof" token; raises ExpressionError on a bad literal."""
    tokens: list[Token] = []
    i, length = 0, len(source)
    while i < length:
        char, column = source[i], i + 1
        following = source[i + 1 : i + 2]
        if char.isspace():
            i += 1
        elif char in "'\"":
            end = i + 1
            while end < length and source[end] != char:
                if source[end] == "\n":
                    break
                end += 2 if source[end] == "\\" else 1
            if end >= length or source[end] != char:
                raise ExpressionError(f"string literal not terminated at column {column}")
            tokens.append(Token("string", _unescape(source[i + 1 : end], column + 1), column))
            i = end + 1
        elif char == "`":
            end = i + 1
            parts: list[str] = []
            while True:
                close = source.find("`", end)
                if close < 0:
                    raise ExpressionError(f"raw string literal not terminated at column {column}")
                parts.append(source[end:close])
                if source[close + 1 : close + 2] == "`":  # a doubled backquote stands for one
                    parts.append("`")
                    end = close + 2
                    continue
                break
            tokens.append(Token("string", "".join(parts), column))
            i = close + 1
        elif "0" <= char <= "9" or (char == "." and "0" <= following <= "9"):
            match = _NUMBER.match(source, i)
            assert match is not None
            end = match.end()
            if end < length and _is_alnum(source[end]):
                raise ExpressionError(f"bad number syntax {source[i : end + 1]!r} at column {column}")
            tokens.append(Token("number", source[i:end], column))
            i = end
        elif char == "/" and following in ("/", "*"):
            if following == "/":
                end = source.find("\n", i)
                i = length if end < 0 else end
            else:
                end = source.find("*/", i + 2)
                if end < 0:
                    raise ExpressionError(f"unclosed comment at column {column}")
                i = end + 2
        elif char == "#":
            tokens.append(Token("op", "#", column))
            end = i + 1
            while end < length and _is_alnum(source[end]):
                end += 1
            if end > i + 1:
                tokens.append(Token("ident", source[i + 1 : end], column + 1))
            i = end
        elif char in "([{)]}":
            tokens.append(Token("bracket", char, column))
            i += 1
        elif char in "?|:.":
            pair = char + following
            two = pair in ("?.", "??", "||", "::", "..")
            tokens.append(Token("op", pair if two else char, column))
            i += 2 if two else 1
        elif char in ",;%+-^/":
            tokens.append(Token("op", char, column))
            i += 1
        elif char in "&!=*<>":
            two = following != "" and following in "&=*"
            tokens.append(Token("op", char + following if two else char, column))
            i += 2 if two else 1
        elif _is_alnum(char):
            end = i
            while end < length and _is_alnum(source[end]):
                end += 1
            word = source[i:end]
            tokens.append(Token("op" if word in KEYWORDS else "ident", word, column))
            i = end
        else:
            raise ExpressionError(f"unrecognized character {char!r} at column {column}")
    tokens.append(Token("eof", "", length + 1))
    return tokens
