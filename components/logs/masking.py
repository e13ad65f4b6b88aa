"""Turn a raw log line into what template mining compares: its message without the header, variables masked.

One generic configuration serves every log format we read: the header is cut where `header.split_header` says
(timestamps, levels, fields and a component around a date or a time), and a variable is a token holding a number
(with a unit or not), hex value, IP address, UUID, path, version or timestamp. Masking whole tokens (not just the
digits inside them) and collapsing repeated lists (`blk_1 blk_2 blk_3`) is what lets Drain group lines of one event
together without per-dataset regular expressions.
"""

from __future__ import annotations

import re
from collections import OrderedDict

from components.logs.header import ERROR_LEVELS, level_of, split_header

__all__ = [
    "ERROR_LEVELS",
    "MASK",
    "VARIABLE_PATTERNS",
    "LineTokenizer",
    "level_of",
    "mask_variables",
    "message_tokens",
    "shown_tokens",
    "split_header",
    "template_pattern",
]

MASK = "<*>"
"""What a variable becomes; Drain3 treats exactly this token as a wildcard."""

VARIABLE_PATTERNS: tuple[tuple[str, str], ...] = (
    ("uuid", r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    ("timestamp", r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
    ("ip", r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.])"),  # a port is a number of its own: `<*>:<*>`
    # 1.4.1, v6.1.7601.23505, curl/8.5.0; not a package's own (`jetty-6.1.26`), which names what runs
    ("version", r"(?<![\w.\-])v?\d+(?:\.\d+){2,}(?![\w.])"),
    # /var/log/x, C:\\Windows\\x.dll; one segment (`/health`) is no path: masking it cost Loghub's LODO 0.4 points
    ("path", r"(?<![\w/.:])/[\w.\-]+(?:/[\w.\-]*)+|\b[A-Za-z]:\\[^\s]*"),
    ("hex", r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{4,}\b"),
    # 12, -3, 0.25, `core.529`'s number after a name; a number with its unit (12ms, 1.5s, 512k, 22m0s) is masked but
    # its unit kept, as Loghub's templates write it (`<*>ms`); a signed hex offset (Go's `+0x1d`) is hex, not 0 `x1d`
    (
        "number",
        r"(?:(?<![A-Za-z0-9.])[-+]?|(?<=[A-Za-z]\.))\d+(?:\.\d+)?(?![\w.])"
        r"|(?<![\w.])(?![-+]?0x)[-+]?\d+(?:\.\d+)?(?=[A-Za-zµ]{1,3}(?:\d+(?:\.\d+)?[A-Za-zµ]{1,3})*(?![\w.]))",
    ),
)
"""The variables we mask, in the order they are tried: (name, regular expression)."""

_VARIABLES = re.compile("|".join(f"(?:{pattern})" for _, pattern in VARIABLE_PATTERNS))
_MAYBE_VARIABLE = re.compile(r"[0-9/\\]")
# A date written in words inside a message (`at Sun Jul 10 03:55:15 2005`, `since Jul 10 03:55:15`) is one variable,
# though it spans several words; it is masked before the message is split into words.
_SPACED_DATE = re.compile(
    r"(?<!\S)(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[ \t]+)?(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[ \t]+"
    r"\d{1,2}[ \t]+\d{1,2}:\d{2}:\d{2}(?:[ \t]+\d{4})?(?!\S)"
)
_MONTH_DAY = re.compile(r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[ \t]+\d")
# A count of bytes restated in bigger units in brackets after it (Proxifier's `2838 bytes (2.77 KB) sent`, dd's
# `1048576 bytes (1.0 MB, 1.0 MiB) copied`): many programs add it only above some size, so it is dropped, not masked —
# kept, a small and a big count of one event would differ in their number of words.
_RESTATED_SIZE = re.compile(
    r"(?<=\d)([ \t]+[A-Za-z]+)[ \t]+\((?:\d+(?:\.\d+)?[ \t]?[KMGTPE]?i?B(?:,[ \t]*)?)+\)(?=[\s,;.:]|\Z)"
)
_DIGITS_AS_ONE = bytes.maketrans(b"0123456789", b"1111111111")
_ASCII_DIGIT = re.compile(r"[0-9]")
_LETTER = re.compile(r"[^\W\d_]")
SHAPES_CACHED = 8192
"""How many line shapes (a line with every digit read as 1) a `LineTokenizer` remembers."""
SHAPE_CHARS = 4096
"""The longest line whose shape a `LineTokenizer` remembers: 8192 shapes of 1 MiB lines would be 8 GiB."""
_TRIAL, _PAUSE = 4096, 65536  # lines a tokenizer judges its hit rate over, and lines it then goes uncached


def mask_variables(text: str) -> str:
    """Replace every variable in `text` by `<*>`, leaving the surrounding characters in place."""
    return _VARIABLES.sub(MASK, text)


def message_tokens(message: str, max_tokens: int = 100) -> list[str]:
    """The tokens Drain compares: a token holding a variable becomes `<*>`, a repeated list collapses to one.

    `blk_1 blk_2 blk_3` and `blk_4` become the same single `<*>`: a variable-length list is one variable.
    Lines longer than `max_tokens` are cut, which bounds the cost of matching one line.
    """
    return shown_tokens(message, max_tokens)[0]


def shown_tokens(message: str, max_tokens: int = 100) -> tuple[list[str], list[str]]:
    """`message_tokens` and, position by position, how each token reads in a template (`blk_<*>`, `/<*>:<*>`).

    Mining compares whole tokens (a token with a variable in it is `<*>`), which groups best; a template shows
    what is constant inside a token too, as Loghub's ground truth does.
    """
    tokens, shown, _ = _tokenize(message, max_tokens)
    return tokens, shown


def _tokenize(message: str, max_tokens: int) -> tuple[list[str], list[str], list[int]]:
    """`shown_tokens`, and for each token the index of the word of `message` it comes from."""
    search, sub = _MAYBE_VARIABLE.search, _VARIABLES.sub  # local names: this runs for every word of every line
    tokens: list[str] = []
    shown: list[str] = []
    origin: list[int] = []
    previous = ""
    # Every variable holds a digit or a slash: most words are settled without running the masks. Lists that
    # collapse can shrink a line, so a few more words than `max_tokens` are looked at before the final cut.
    for index, word in enumerate(_words(message)[: 4 * max_tokens]):
        form = sub(MASK, word) if search(word) else word
        if form == word:
            tokens.append(word)
        elif form != previous:
            tokens.append(MASK)
        else:  # the same variable as the word before: one list
            continue
        previous = form
        shown.append(form)
        origin.append(index)
    if MASK in tokens and tokens.count(MASK) == len(tokens):
        # Every word holds a variable (`cancelNotification,index:3`, `ready=true,policy=3,…`): matched as wholes,
        # every such line would be one event. What stays of the words once their variables are masked is compared.
        tokens = [form if _LETTER.search(form) else MASK for form in shown]
    return tokens[:max_tokens], shown[:max_tokens], origin[:max_tokens]


def _words(message: str) -> list[str]:
    """The words of a message, a date written in words (`Sun Jul 10 03:55:15 2005`) taken as one `<*>`.

    A byte count's restatement in brackets (`2838 bytes (2.77 KB)`) is left out.
    """
    if _MONTH_DAY.search(message):  # cheaper to look for than the whole date
        message = _SPACED_DATE.sub(MASK, message)
    if "B)" in message:
        message = _RESTATED_SIZE.sub(r"\1", message)
    return message.split()


_Shape = tuple[int, list[str] | None, list[str] | None, list[tuple[int, int]]]


class LineTokenizer:
    """A raw line's message (`split_header`) and its `shown_tokens`, remembered for lines that differ in digits only.

    Logs repeat: the lines of one event mostly differ in their numbers. No rule of this module tells one digit from
    another (each names a digit class, never a digit), so all lines of one shape — the line with every digit read
    as 1 — have their header end at the same place and the same words hold variables; a token that keeps a digit
    (`ssh2`, `rdd_4_<*>`) is taken from the line itself. The one rule that names a digit, hex's `0x`, keeps its
    lines out of the cache, and so does a literal `<*>` (it could pass for a variable). The `shapes` most recently
    seen are remembered, so memory stays flat however many lines go through. Where fewer than a quarter of the
    lines meet a known shape (a random word in every line), remembering costs more than it saves — the churn of
    cached lists keeps the garbage collector busy — so the tokenizer then goes uncached for a while and tries again.
    A line longer than `SHAPE_CHARS` is never remembered: its shape is as long as it is.
    """

    def __init__(self, max_tokens: int = 100, shapes: int = SHAPES_CACHED) -> None:
        self.max_tokens = max_tokens
        self._size = shapes
        self._seen = self._hits = self._paused = 0
        # shape -> where the header ends, tokens, shown, and (position, word index) of the tokens with a digit
        self._shapes: OrderedDict[bytes, _Shape] = OrderedDict()

    def tokens(self, line: str) -> tuple[str, list[str], list[str]]:
        """`(message, tokens, shown)` of a raw line; the lists may be shared with other lines: do not change them."""
        if self._seen >= _TRIAL:  # how the last lines fared
            if self._hits * 4 < self._seen:
                self._paused = _PAUSE
                self._shapes.clear()
            self._seen = self._hits = 0
        if self._paused or "0x" in line or MASK in line or len(line) > SHAPE_CHARS:
            self._paused = max(0, self._paused - 1)
            message = split_header(line)[1]
            return (message, *shown_tokens(message, self.max_tokens))
        self._seen += 1
        shape = line.encode("utf-8", "surrogatepass").translate(_DIGITS_AS_ONE)
        known = self._shapes.get(shape)
        if known is None:
            return self._learn(shape, line)
        self._hits += 1
        self._shapes.move_to_end(shape)
        end, tokens, shown, fixes = known
        message = line[end:]
        if tokens is None or shown is None:
            tokens, shown = shown_tokens(message, self.max_tokens)
        elif fixes:
            words, tokens, shown = _words(message), tokens.copy(), shown.copy()
            for position, index in fixes:
                if tokens[position] == MASK:
                    shown[position] = mask_variables(words[index])  # it holds a digit: what `_tokenize` does
                else:
                    tokens[position] = shown[position] = words[index]
        return message, tokens, shown

    def _learn(self, shape: bytes, line: str) -> tuple[str, list[str], list[str]]:
        """Tokenize a line of a shape not seen (lately) and remember what holds for every line of that shape."""
        header, message = split_header(line)
        tokens, shown, origin = _tokenize(message, self.max_tokens)
        fixes = []
        if _ASCII_DIGIT.search(" ".join(shown)):
            fixes = [(position, index) for position, index in enumerate(origin) if _ASCII_DIGIT.search(shown[position])]
        known: _Shape = (len(header), tokens, shown, fixes)
        if fixes and (
            any(tokens[position] != MASK and MASK in tokens[position] for position, _ in fixes)  # a masked word kept
            or self._collapses_by_digits(message, tokens, origin, fixes)
        ):
            known = (len(header), None, None, [])
        self._shapes[shape] = known
        if len(self._shapes) > self._size:
            self._shapes.popitem(last=False)  # the least recently seen shape
        return message, tokens, shown

    def _collapses_by_digits(
        self, message: str, tokens: list[str], origin: list[int], fixes: list[tuple[int, int]]
    ) -> bool:
        """Whether which words collapse into one list depends on the digits, not on the shape alone.

        `_tokenize` drops a word whose masked form repeats the word before's: a comparison of two forms that both
        keep digits (`rdd_1_<*> rdd_2_<*>`) is the only one that can differ between lines of a shape. So it is the
        word after a kept token with a variable and a digit: dropped (a gap in `origin`, or words left after the
        last token of a line shorter than `max_tokens`), or kept with a variable and a digit too.
        """
        variables = {position for position, _ in fixes if tokens[position] == MASK}
        words = min(len(_words(message)), 4 * self.max_tokens)
        for position in variables:
            following = origin[position] + 1
            if position + 1 < len(origin):
                if origin[position + 1] != following or position + 1 in variables:
                    return True
            elif len(origin) < self.max_tokens and following < words:
                return True
        return False


def template_pattern(template: str) -> re.Pattern[str]:
    """A pattern that takes a message's variables out of it: each `<*>` of `template` is one group.

    Tokens are matched across any whitespace, and text after the template's last token is allowed (a line that
    was cut at `max_tokens`).
    """
    body = r"\s+".join(
        "(.*?)".join(re.escape(piece) for piece in token.split(MASK)) for token in template.split(" ") if token
    )
    return re.compile(rf"\s*{body}(?:\s.*)?\Z" if body else r"\Z", re.DOTALL)
