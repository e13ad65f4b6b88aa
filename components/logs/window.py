"""A window of logs summed up per template: counts, errors, feedback, latency and a few examples of each.

Comparison never looks at lines, only at two of these summaries, so a window of any length costs memory in
proportion to its templates. The summary is also what a run keeps in its state directory: tonight's window is
compared with yesterday's summary without reading yesterday's logs again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, Field

from components.logs.masking import message_tokens
from components.logs.reader import Malformed, SourceLine
from components.logs.records import Entry, RequestRecord
from components.logs.stats import QuantileSketch
from components.logs.templates import Miner

__all__ = ["OVERFLOW_KEY", "TemplateCounts", "WindowBuilder", "WindowSummary"]

OVERFLOW_KEY = "other"
"""Where lines go once a window tracks `max_templates` templates (bounded memory on pathological logs)."""
_EXAMPLES = 2
_EXAMPLE_CHARS = 200

TemplateKind = Literal["log", "prompt"]


class TemplateCounts(BaseModel):
    """One template in one window: lines, errors, feedback, corrections, and examples to look at."""

    key: str = Field(description="`log:<id>` for service log events, `prompt:<id>` for request prompts")
    kind: TemplateKind
    template: str = ""
    count: int = 0
    errors: int = 0
    positive: int = 0
    negative: int = 0
    corrections: int = 0
    examples: list[str] = Field(default_factory=list)
    failure_examples: list[str] = Field(default_factory=list, description="lines with an error or a complaint")
    latency_ms: QuantileSketch | None = Field(default=None, description="the lines that say how long they took")

    @property
    def rated(self) -> int:
        """Requests with feedback (positive or negative)."""
        return self.positive + self.negative

    def add_latency(self, value: float) -> None:
        """Count one line's latency in the template's sketch."""
        if self.latency_ms is None:
            self.latency_ms = QuantileSketch()
        self.latency_ms.add(value)

    def absorb(self, other: TemplateCounts) -> None:
        """Add the counts of `other`, a template the merge pass joined to this one."""
        for name in ("count", "errors", "positive", "negative", "corrections"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.examples = (self.examples + other.examples)[:_EXAMPLES]
        self.failure_examples = (self.failure_examples + other.failure_examples)[:_EXAMPLES]
        if other.latency_ms is not None:
            if self.latency_ms is None:
                self.latency_ms = QuantileSketch()
            self.latency_ms.merge(other.latency_ms)


class WindowSummary(BaseModel):
    """Everything comparison needs to know about one window of logs."""

    name: str
    sources: list[str] = Field(default_factory=list)
    files: int = 0
    log_lines: int = 0
    log_errors: int = 0
    requests: int = 0
    request_errors: int = 0
    positive: int = 0
    negative: int = 0
    corrections: int = 0
    latency_ms: QuantileSketch = Field(default_factory=QuantileSketch)
    window: str | None = Field(default=None, description="the time window the lines were cut to (ISO 8601)")
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    templates: dict[str, TemplateCounts] = Field(default_factory=dict)
    malformed: Malformed = Field(default_factory=Malformed)
    untimed_lines: int = Field(
        default=0, description="lines before their file's first time: no time, so in no window (cut by time only)"
    )
    outside_lines: int = Field(default=0, description="lines whose time falls in no window (cut by time only)")

    @property
    def lines(self) -> int:
        """Log events and requests together."""
        return self.log_lines + self.requests

    @property
    def rated(self) -> int:
        """Requests with feedback (positive or negative)."""
        return self.positive + self.negative

    def total(self, kind: TemplateKind) -> int:
        """How many lines of `kind` the window holds: log events or requests."""
        return self.log_lines if kind == "log" else self.requests

    def joined(self, events: Mapping[str, tuple[str, str]]) -> WindowSummary:
        """The summary with each template counted under its event: `events` maps a key to (event key, template).

        The merge pass (`Miner.events`) joins templates after mining; a key it does not know stays as it is.
        """
        templates: dict[str, TemplateCounts] = {}
        for key, counts in self.templates.items():
            event, template = events.get(key, (key, counts.template))
            joined = templates.get(event)
            if joined is None:
                templates[event] = counts.model_copy(update={"key": event, "template": template}, deep=True)
            else:
                joined.absorb(counts)
        return self.model_copy(update={"templates": templates})


def _example(line: SourceLine, text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) > _EXAMPLE_CHARS:
        flat = flat[: _EXAMPLE_CHARS - 1] + "…"
    return f"{line.where}: {flat}"


class WindowBuilder:
    """Feeds the entries of one window through the miners and sums them up per template."""

    def __init__(
        self,
        name: str,
        *,
        log_miner: Miner,
        prompt_miner: Miner,
        malformed: Malformed | None = None,
        max_templates: int = 10_000,
    ) -> None:
        self.summary = WindowSummary(name=name, malformed=malformed or Malformed())
        self._miners = {"log": log_miner, "prompt": prompt_miner}
        self._max_templates = max_templates

    def _counts(self, kind: TemplateKind, text: str) -> TemplateCounts:
        miner = self._miners[kind]
        key = f"{kind}:{miner.add(message_tokens(text, miner.settings.max_tokens))}"
        templates = self.summary.templates
        counts = templates.get(key)
        if counts is None:
            if len(templates) >= self._max_templates:
                key = OVERFLOW_KEY
                counts = templates.get(key)
            if counts is None:
                counts = templates[key] = TemplateCounts(key=key, kind=kind)
        return counts

    def add(self, line: SourceLine, entry: Entry) -> str:
        """Count one entry of the window; returns the key of its template."""
        summary = self.summary
        if isinstance(entry, RequestRecord):
            counts = self._counts("prompt", entry.prompt)
            summary.requests += 1
            failed = entry.failed or entry.feedback == "negative"
            summary.request_errors += entry.failed
            if entry.feedback == "positive":
                summary.positive += 1
                counts.positive += 1
            elif entry.feedback == "negative":
                summary.negative += 1
                counts.negative += 1
            if entry.correction:
                summary.corrections += 1
                counts.corrections += 1
            if entry.latency_ms is not None:
                summary.latency_ms.add(entry.latency_ms)
                counts.add_latency(entry.latency_ms)
            if entry.timestamp:
                if summary.first_timestamp is None or entry.timestamp < summary.first_timestamp:
                    summary.first_timestamp = entry.timestamp
                if summary.last_timestamp is None or entry.timestamp > summary.last_timestamp:
                    summary.last_timestamp = entry.timestamp
            text = entry.prompt
            counts.errors += entry.failed
        else:
            counts = self._counts("log", entry.message)
            summary.log_lines += 1
            failed = entry.failed
            summary.log_errors += failed
            if entry.latency_ms is not None:
                counts.add_latency(entry.latency_ms)
            counts.errors += failed
            text = entry.message
        counts.count += 1
        if len(counts.examples) < _EXAMPLES:
            counts.examples.append(_example(line, text))
        if failed and len(counts.failure_examples) < _EXAMPLES:
            counts.failure_examples.append(_example(line, text))
        return counts.key

    def finish(self, sources: list[str], files: int) -> WindowSummary:
        """The window's summary, with every template's final text as the miners know it now."""
        summary = self.summary
        summary.sources, summary.files = sources, files
        for counts in summary.templates.values():
            if counts.key != OVERFLOW_KEY:
                kind, _, cluster = counts.key.partition(":")
                counts.template = self._miners[kind].template(int(cluster))
        return summary
