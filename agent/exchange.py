"""What the LLM policy asked and heard while it decided: a small typed record, kept in the Decision, traced later.

The record holds what the conversation added, not what can be rebuilt: the system prompt and the observation's
user message are `agent.prompts`' pure renderings of the decision's own observation, so each request's messages
are those two plus the replies and tool results of the rounds before it (`Exchange.messages`). Times are seconds
since the epoch, from the policy's clock. Nothing here carries the API key: the policy scrubs what it records.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Check", "Exchange", "Round", "ToolCall"]


class _Frozen(BaseModel):
    # Built when first validated: most of these are only ever fields of another model (benchmarks/cli.py).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ToolCall(_Frozen):
    """One function the model called in a reply, and what went back to it (`decide` is checked, never run)."""

    id: str
    name: str
    arguments: str  # the JSON text the model sent
    result: str = ""  # the tool message's content; "" for decide
    started_s: float = 0.0
    duration_s: float = Field(default=0.0, ge=0)

    def as_message_call(self) -> dict[str, Any]:
        """The call as it stands in the assistant message of the next request (OpenAI's shape)."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


class Round(_Frozen):
    """One POST to the chat endpoint and its reply, or why there was no usable reply (`error`)."""

    started_s: float
    duration_s: float = Field(ge=0)
    content: str | None = None  # the assistant's text, usually none beside tool calls
    tool_calls: list[ToolCall] = Field(default_factory=list)
    error: str = ""  # e.g. "the LLM endpoint timed out after 30 s"

    @property
    def reply(self) -> dict[str, Any]:
        """The assistant message as the endpoint returned it (content and tool calls)."""
        return {
            "role": "assistant",
            "content": self.content,
            "tool_calls": [c.as_message_call() for c in self.tool_calls],
        }


CheckName = Literal["action", "stage", "guardrails", "invariants"]


class Check(_Frozen):
    """One check of the model's `decide` answer, in the order they run; the first that fails ends the list."""

    name: CheckName  # a valid action; allowed at the stage; the guardrails; the request's invariants
    passed: bool
    detail: str = ""  # the refusal's sentence when it failed


class Exchange(_Frozen):
    """The whole conversation of one decision: the endpoint, the tools offered, the rounds, the answer's checks."""

    model: str
    endpoint: str  # the API's base, without user info or query
    tools: list[str] = Field(default_factory=list)  # the functions offered, decide last
    rounds: list[Round] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)

    @property
    def used(self) -> bool:
        """True when the model's answer passed every check (the LLM decided)."""
        return len(self.checks) == 4 and all(check.passed for check in self.checks)

    @property
    def answer(self) -> ToolCall | None:
        """The `decide` call that ended the conversation, if the model made one."""
        last = self.rounds[-1].tool_calls if self.rounds else []
        return next((call for call in last if call.name == "decide"), None)

    def messages(self, prompt: list[dict[str, Any]], upto: int) -> list[dict[str, Any]]:
        """The messages of request `upto` (0-based): `prompt` (system and user), then every earlier round."""
        messages = list(prompt)
        for done in self.rounds[:upto]:
            messages.append({"role": "assistant", "content": done.content, "tool_calls": done.reply["tool_calls"]})
            messages += [{"role": "tool", "tool_call_id": c.id, "content": c.result} for c in done.tool_calls]
        return messages
