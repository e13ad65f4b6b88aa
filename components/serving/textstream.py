"""Token ids in, text deltas out: incremental detokenization with stop sequences, the same for every response.

Streaming and non-streaming responses both pass through `TextStream`, so the chunks of a stream always
concatenate to the text of the same request sent without streaming.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["TextStream"]


class TextStream:
    """Turns generated token ids into text deltas, holding back text that may still become a stop sequence.

    Every step decodes all ids generated so far: a token may be half a UTF-8 character or change how the
    previous token renders, and decoding the whole sequence is what the final text will be.
    """

    def __init__(self, decode: Callable[[Sequence[int]], str], stop: Sequence[str] = ()):
        self._decode = decode
        self._stop = tuple(stop)
        self._ids: list[int] = []
        self._text = ""
        self._emitted = 0
        self.stopped = False

    @property
    def tokens(self) -> int:
        """How many token ids have been pushed."""
        return len(self._ids)

    @property
    def text(self) -> str:
        """The text generated so far, cut before a stop sequence once one appeared."""
        return self._text

    def push(self, token_id: int) -> str:
        """Add one generated token; return the text that became final with it (often empty)."""
        if self.stopped:
            return ""
        self._ids.append(token_id)
        text = self._decode(self._ids)
        if text.endswith("\ufffd"):
            return ""  # half a character: wait for the rest of its bytes
        hits = [i for i in (text.find(s) for s in self._stop) if i >= 0]
        if hits:
            self.stopped = True
            self._text = text[: min(hits)]
            return self._flush(len(self._text))
        self._text = text
        return self._flush(len(text) - self._pending_stop(text))

    def finish(self) -> str:
        """The text still held back, once generation ended."""
        return self._flush(len(self._text))

    def _pending_stop(self, text: str) -> int:
        """Length of the longest end of `text` that starts a stop sequence."""
        longest = 0
        for stop in self._stop:
            for size in range(min(len(stop) - 1, len(text)), longest, -1):
                if text.endswith(stop[:size]):
                    longest = size
                    break
        return longest

    def _flush(self, upto: int) -> str:
        if upto <= self._emitted:
            return ""
        delta = self._text[self._emitted : upto]
        self._emitted = upto
        return delta
