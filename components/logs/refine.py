"""Optional: an LLM reads each mined template beside one of its lines and marks the variables Drain left constant.

As LILAC does, the model is asked once per template, never per line, and its answers are cached in a file, so a
nightly run asks only about templates it has not seen. An answer is used only when it still matches the line it
was shown and keeps a constant word; otherwise — and whenever the endpoint cannot be reached — the mined template
stands: refinement can improve a parse, never stop one. Templates the model writes the same become one event.
Off by default (`vcpilot logs parse --llm-refine`); the endpoint is the agent's (`components/llm.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from components.files import write_text
from components.llm import LLMEndpoint
from components.logs.masking import MASK, template_pattern

if TYPE_CHECKING:
    import httpx

__all__ = ["PROMPT", "RefineSummary", "TemplateRefiner"]

PROMPT = (
    "A log parser grouped log lines under the template below; `<*>` marks a variable. Some variables may still be "
    "written out (a user name, a host, a state, an id). Reply with the template alone, on one line: the same words, "
    "with every variable replaced by <*>. Do not add or remove words.\n\nTemplate: {template}\nLog line: {line}"
)


class RefineSummary(BaseModel):
    """What refinement did: templates asked about, answered from the cache, changed, and why it stopped if it did."""

    asked: int = 0
    cached: int = 0
    changed: int = 0
    problem: str = ""


class TemplateRefiner:
    """Asks `endpoint` to refine templates, one request per template not in the cache file."""

    def __init__(
        self,
        endpoint: LLMEndpoint,
        cache: Path | None = None,
        *,
        timeout_s: float = 30,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.cache = cache
        self.timeout_s = timeout_s
        self._transport = transport
        self.summary = RefineSummary()
        self._answers: dict[str, str] = {}
        if cache is not None and cache.is_file():
            try:
                loaded = json.loads(cache.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                loaded = {}  # a damaged cache only costs the questions again
            if isinstance(loaded, dict):
                self._answers = {k: v for k, v in loaded.items() if isinstance(k, str) and isinstance(v, str)}

    def refine(self, events: Mapping[int, tuple[int, str]], examples: Mapping[int, str]) -> dict[int, tuple[int, str]]:
        """`events` (`Miner.events()`: template id → (event id, template)) with refined templates and joined events.

        `examples` holds one message per template id, the line the model is shown and its answer must match.
        """
        refined: dict[int, str] = {}  # event id → its template after refinement
        for identity, (event, template) in sorted(events.items()):
            if event not in refined:
                refined[event] = self._template(template, examples.get(identity, ""))
        first: dict[str, int] = {}  # refined template → the event that keeps its id
        for event in sorted(refined):
            first.setdefault(refined[event], event)
        self._save()
        return {identity: (first[refined[event]], refined[event]) for identity, (event, _) in events.items()}

    def _template(self, template: str, line: str) -> str:
        answer = self._answers.get(template)
        if answer is not None:
            self.summary.cached += 1
        elif self.summary.problem or not line:  # the endpoint failed once this run: do not wait on it again
            return template
        else:
            answer = self._ask(template, line)
            if answer is None:
                return template
            self._answers[template] = answer
        if answer != template and _usable(answer, template, line):
            self.summary.changed += 1
            return answer
        return template

    def _ask(self, template: str, line: str) -> str | None:
        import httpx  # only a run that refines pays for it

        self.summary.asked += 1
        endpoint = self.endpoint
        url = endpoint.url.rstrip("/").removesuffix("/chat/completions") + "/chat/completions"
        headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        body = {
            "model": endpoint.model,
            "messages": [{"role": "user", "content": PROMPT.format(template=template, line=line)}],
            "temperature": 0,
        }
        try:
            with httpx.Client(timeout=self.timeout_s, headers=headers, transport=self._transport) as client:
                response = client.post(url, json=body)
            response.raise_for_status()
            content = response.json()["choices"][0]["message"]["content"]
        except httpx.HTTPStatusError as err:
            self.summary.problem = f"the LLM endpoint answered HTTP {err.response.status_code}"
            return None
        except httpx.HTTPError as err:
            self.summary.problem = f"the LLM endpoint could not be reached ({type(err).__name__})"
            return None
        except (ValueError, KeyError, IndexError, TypeError):
            self.summary.problem = "the LLM endpoint's reply is not a chat completion"
            return None
        text = str(content).strip().strip("`").strip()
        return " ".join(text.splitlines()[0].split()) if text else ""

    def _save(self) -> None:
        if self.cache is not None and self._answers:
            write_text(self.cache, json.dumps(self._answers, indent=1, sort_keys=True) + "\n")


def _usable(answer: str, template: str, line: str) -> bool:
    """The answer still describes the line it was shown, keeps as many words as the template and a constant one."""
    words = answer.split(" ")
    if len(words) != len(template.split(" ")) or all(MASK in word for word in words):
        return False
    return template_pattern(answer).match(line) is not None
