"""The LLM policy: ask any OpenAI-compatible chat endpoint for one action, check it hard, and fall back to the rules.

The model sees the observation (cluster text quoted as data, see `agent.prompts`), may call the read-only tools
of `agent.tools` for a few rounds, and must answer with exactly one call of a `decide` function whose arguments
are one action. The answer is used only when it is a valid action for the stage, passes the guardrails and keeps
the request's invariants (`check_answer`); anything else — a timeout, an HTTP error, a reply that is not JSON,
no `decide` call, an action out of bounds, a conversation that outlasts the guardrails' `llm_deadline_s` — hands
the decision to the fallback policy (the rules), and the Decision says why in one sentence. The API key travels
only in the Authorization header: it is scrubbed from every message this module writes. Every decision carries
its `Exchange` (`agent.exchange`): each request's timing and reply, each tool call and its result, each check of
the answer — what the MLflow trace is made from.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from agent.actions import Abort, Action, Downscale, RetryFromCheckpoint, Wait, action_schema, parse_action
from agent.capacity import Pool, missing_priority_class, queue_rooms, say_gpus
from agent.exchange import Check, CheckName, Exchange, Round, ToolCall
from agent.failures import classify_failure
from agent.guardrails import Guardrails, GuardrailViolation
from agent.observation import Observation
from agent.policy import Decision, Policy, Stage
from agent.policy_rules import RulePolicy
from agent.prompts import ALLOWED_KINDS, SYSTEM_PROMPT, render_observation, render_tool_result
from agent.tools import TOOLS, ToolContext, call_tool, openai_tools
from components.llm import LLMEndpoint, header_key
from components.redact import MASK, redact_text
from components.untrusted import loads_json, printable, unique_keys

__all__ = ["LLMPolicy", "check_answer"]

log = logging.getLogger(__name__)

DECIDE = "decide"
# One chat completion with a few tool calls is a few KiB: a reply past this is not read further (nor kept in memory).
MAX_REPLY_BYTES = 1024 * 1024
# The least time a wait may pause before looking again (as the rules' own waits): a model's `recheck_s` of 1e-9
# would have the plan step read the cluster in a loop for as long as max-plan-wait-s lasts.
MIN_RECHECK_S = 1.0
MAX_TOOL_CALLS = 16  # in one reply: a model reads a few things at a time, and each call is a round trip to the cluster
_GPU_RULES = ("max_gpus_per_job", "requested_gpus")  # refusals best told by the GPU count asked


class _Transcript:
    """What one decision's conversation has produced so far; `Exchange` is its frozen form."""

    def __init__(self) -> None:
        self.tools: list[str] = []
        self.rounds: list[Round] = []
        self.checks: list[Check] = []
        self.refusals: list[str] = []  # met on the way: tool calls refused, then the answer itself

    def check(self, name: CheckName, detail: str = "") -> None:
        self.checks.append(Check(name=name, passed=not detail, detail=detail))


class _Unusable(Exception):
    """Why the LLM's answer is not used: `reason` for the Decision, `refusal` when a limit refused it."""

    def __init__(self, reason: str, refusal: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.refusal = refusal


def check_answer(action: Action, observation: Observation, stage: Stage) -> None:
    """Raise a one-sentence ValueError unless `action` is allowed at `stage` and keeps the request's invariants.

    The invariants: the global batch is unchanged, the GPUs stay within [gpus_min, gpus] in whole pods, the queue
    is the request's or its fallback and one Volcano admits jobs into (`QueueRoom.refusal`: it exists, Open, a
    leaf), the priority class is neither raised nor one the cluster lacks, a downscale starts from the request's
    GPUs, a retry stays within the attempt budget (`max_attempts`), keeps off the nodes already avoided and those
    blamed for this failure (`classify_failure`, as the rules do) and resumes only from the checkpoint observed,
    and the size is not one the rules weigh as never running (above the queue's limit or the healthy nodes' GPUs,
    when nodes were observed: its gang would stay Pending for good). An attempt that found its checkpoint volume
    full (agent.failures, kind "storage") takes nothing but an abort.
    """
    if action.kind not in ALLOWED_KINDS[stage]:
        raise ValueError(f"{action.kind} is not allowed at {stage}, which takes {_either(stage)}")
    if isinstance(action, Wait) and action.recheck_s < MIN_RECHECK_S:
        raise ValueError(f"a wait must look again after {MIN_RECHECK_S:g} s at least, not {action.recheck_s:g} s")
    if isinstance(action, Wait | Abort):
        return
    failure = classify_failure(observation.job, observation) if stage == "diagnose" else None
    if failure is not None and failure.kind == "storage":
        raise ValueError(f"a {action.kind} after {failure.cause} would fail the same way: {failure.verdict}")
    request = observation.request
    if not request.gpus_min <= action.gpus <= request.gpus:
        raise ValueError(f"the action asks {action.gpus} GPUs, outside the request's {request.gpus_min}–{request.gpus}")
    if action.gpus % request.gpus_per_pod:
        raise ValueError(f"the action asks {action.gpus} GPUs, not a multiple of {request.gpus_per_pod} per pod")
    if action.global_batch != request.global_batch:
        raise ValueError(
            f"the action's global batch {action.gpus} × {action.micro_batch} × {action.grad_accum} = "
            f"{action.global_batch} is not the request's {request.global_batch}"
        )
    queues = {request.queue, request.fallback_queue} - {""}
    if action.queue not in queues:
        raise ValueError(f"the action's queue {action.queue!r} is neither the request's queue nor its fallback")
    if action.priority_class not in ("", request.priority_class, *observation.run_bands):
        raise ValueError(f"the action raises the priority class to {action.priority_class!r}")
    if (missing := missing_priority_class(observation)) and action.priority_class == request.priority_class:
        raise ValueError(f"the action's job never starts: {missing}")
    room = next(room for room in queue_rooms(observation) if room.name == action.queue)
    if room.refusal:
        raise ValueError(f"the action's queue cannot take the job: {room.refusal}")
    if action.kind == "proceed" and action.gpus != request.gpus:
        raise ValueError(
            f"a proceed must use the {request.gpus} GPUs asked for, not {action.gpus}; that is a downscale"
        )
    if isinstance(action, Downscale) and action.from_gpus != request.gpus:
        raise ValueError(f"a downscale must start from the request's {request.gpus} GPUs")
    if isinstance(action, RetryFromCheckpoint):
        if request.attempt >= request.max_attempts:
            raise ValueError(
                f"attempt {request.attempt} of {request.max_attempts} was the last (max-recovery-attempts): "
                "only an abort is left"
            )
        dropped = sorted(set(request.avoid_nodes) - set(action.avoid_nodes))
        if dropped:
            raise ValueError(f"the retry drops avoided node(s) {', '.join(dropped)}")
        blamed = [node for node in failure.bad_nodes if node not in action.avoid_nodes] if failure else []
        if blamed:
            raise ValueError(f"the retry goes back onto {', '.join(blamed)}, blamed for this failure")
        # Only nodes the observation names: any other string would land in the job's node affinity as it is.
        seen_nodes = {n.name for n in observation.nodes} | set(request.avoid_nodes)
        seen_nodes |= {p.node for p in observation.job.pods if p.node} if observation.job else set()
        unknown = sorted(set(action.avoid_nodes) - seen_nodes)
        if unknown:
            named = ", ".join(printable(node, 100) for node in unknown[:5])
            raise ValueError(f"the retry avoids {len(unknown)} node(s) the observation does not name: {named}")
        known = {"", request.resume_checkpoint}
        if observation.checkpoint is not None:
            known.add(observation.checkpoint.path)
        if action.checkpoint not in known:
            raise ValueError(
                f"the retry resumes from {action.checkpoint!r}, a checkpoint the observation does not name"
            )
    if observation.nodes:  # as the rules weigh a candidate; with no node observed, Volcano queues it
        avoid = action.avoid_nodes if isinstance(action, RetryFromCheckpoint) else request.avoid_nodes
        pool = Pool.of(observation.nodes, request.model_copy(update={"avoid_nodes": avoid}))
        if never := room.never(action.gpus) or pool.never(action.gpus):
            raise ValueError(f"{say_gpus(action.gpus)} can never run in queue {action.queue}: {never}")


class LLMPolicy:
    """A `Policy` backed by an OpenAI-compatible chat endpoint with tool calling; the rules decide when it cannot."""

    name = "llm"

    def __init__(
        self,
        url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 30,
        max_rounds: int = 4,
        guardrails: Guardrails,
        tools_context: ToolContext | None = None,
        fallback: Policy | None = None,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        endpoint = url.strip().rstrip("/").removesuffix("/chat/completions")
        if not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"the LLM URL {_display(endpoint)!r} is not http(s): give the API's base, e.g. .../v1")
        if timeout_s <= 0 or max_rounds < 1:
            raise ValueError(f"the LLM policy needs timeout_s > 0 and max_rounds ≥ 1, not {timeout_s} and {max_rounds}")
        self.url = endpoint
        self.model = model
        self.timeout_s = timeout_s
        self.max_rounds = max_rounds
        self.guardrails = guardrails
        self.tools_context = tools_context
        self.fallback: Policy = fallback if fallback is not None else RulePolicy()
        self._api_key = header_key(api_key)
        self._transport = transport
        self._clock = clock

    @classmethod
    def from_env(
        cls,
        *,
        guardrails: Guardrails | None = None,
        tools_context: ToolContext | None = None,
        fallback: Policy | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> LLMPolicy:
        """The policy from VCPILOT_LLM_URL, VCPILOT_LLM_MODEL and VCPILOT_LLM_API_KEY (or OPENAI_API_KEY)."""
        endpoint = LLMEndpoint.from_env(environ, otherwise="use the rule policy")
        return cls(
            endpoint.url,
            endpoint.model,
            endpoint.api_key,
            guardrails=guardrails if guardrails is not None else Guardrails.from_env(),
            tools_context=tools_context,
            fallback=fallback,
        )

    def __repr__(self) -> str:
        return f"LLMPolicy(url={_display(self.url)!r}, model={self.model!r})"  # never the key

    def decide(self, observation: Observation, stage: Stage) -> Decision:
        """Ask the model; use its action when it passes every check, or let the fallback decide and say why."""
        transcript = _Transcript()
        try:
            action = self._converse(observation, stage, transcript)
        except _Unusable as why:
            reason = self._scrub(why.reason)
            transcript.refusals += [why.refusal] if why.refusal else []
            log.warning("the LLM policy fell back to %s: %s", self.fallback.name, reason)
            decision = self.fallback.decide(observation, stage)
            mine = [self._scrub(r) for r in transcript.refusals]
            update = {"fallback": reason, "refusals": [*mine, *decision.refusals], "exchange": self._record(transcript)}
            return decision.model_copy(update=update)
        return Decision(
            stage=stage,
            policy=self.name,
            action=action,
            observation=observation,
            refusals=[self._scrub(r) for r in transcript.refusals],
            exchange=self._record(transcript),
        )

    def _record(self, transcript: _Transcript) -> Exchange:
        return Exchange(
            model=self.model,
            endpoint=_display(self.url),
            tools=transcript.tools,
            rounds=transcript.rounds,
            checks=transcript.checks,
        )

    # -- the conversation ------------------------------------------------------------------------------------

    def _converse(self, observation: Observation, stage: Stage, transcript: _Transcript) -> Action:
        readers = openai_tools(read_only=True) if self.tools_context is not None else []
        offered = {spec["function"]["name"] for spec in readers}
        transcript.tools = [*(spec["function"]["name"] for spec in readers), DECIDE]
        decide_spec = {
            "type": "function",
            "function": {
                "name": DECIDE,
                "description": f"Answer with one action; at {stage} its kind is {_either(stage)}.",
                # Top-level "type" too: OpenAI refuses function parameters that are not declared an object.
                "parameters": {"type": "object", **action_schema()},
            },
        }
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": render_observation(observation, stage)},
        ]
        # One deadline for the whole conversation: each request gets what is left of it (`_post`), and no round
        # starts once it has passed, whatever the rounds, the tools and a slow endpoint took.
        deadline = time.monotonic() + self.guardrails.llm_deadline_s
        for _ in range(self.max_rounds):
            if time.monotonic() >= deadline:  # the tools took the rest of it
                raise _Unusable(self._late(len(transcript.rounds)))
            started = self._clock()
            try:
                message = self._complete(messages, [*readers, decide_spec], deadline, len(transcript.rounds))
                calls = message.get("tool_calls") or []
                if not isinstance(calls, list) or not all(isinstance(call, dict) for call in calls):
                    raise _Unusable("the LLM endpoint's tool_calls is not a list of calls: not an OpenAI completion")
            except _Unusable as why:
                failed = Round(started_s=started, duration_s=self._clock() - started, error=self._scrub(why.reason))
                transcript.rounds.append(failed)
                raise
            # The ids the tool messages answer: the model's, else made up (after the assistant message).
            ids = [str(call.get("id") or f"call_{len(messages) + 1 + i}_{i}") for i, call in enumerate(calls)]
            reply = Round(
                started_s=started,
                duration_s=self._clock() - started,
                content=self._text(message.get("content")),
                tool_calls=[self._recorded(call, call_id) for call, call_id in zip(calls, ids, strict=True)],
            )
            transcript.rounds.append(reply)
            decides = [call for call in calls if _function(call).get("name") == DECIDE]
            if len(decides) > 1:
                raise _Unusable(f"the LLM called decide {len(decides)} times in one answer instead of once")
            if decides:
                return self._check(decides[0], observation, stage, transcript)
            if not calls:
                raise _Unusable("the LLM answered without calling decide")
            if len(calls) > MAX_TOOL_CALLS:
                raise _Unusable(f"the LLM asked for {len(calls)} tool calls in one answer, more than {MAX_TOOL_CALLS}")
            messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": calls})
            ran: list[ToolCall] = []
            for call, recorded in zip(calls, reply.tool_calls, strict=True):
                if time.monotonic() >= deadline:  # slow tools: the deadline holds between calls too
                    raise _Unusable(self._late(len(transcript.rounds)))
                call_started = self._clock()
                content = self._run_tool(call, offered, transcript.refusals)
                messages.append({"role": "tool", "tool_call_id": recorded.id, "content": content})
                timing = {"started_s": call_started, "duration_s": max(0.0, self._clock() - call_started)}
                ran.append(recorded.model_copy(update={"result": self._scrub(content), **timing}))
            transcript.rounds[-1] = reply.model_copy(update={"tool_calls": ran})
        raise _Unusable(f"the LLM did not call decide within {self.max_rounds} rounds")

    def _recorded(self, call: dict[str, Any], call_id: str) -> ToolCall:
        """A call of the model's reply as the record keeps it: arguments as text, the key scrubbed."""
        function = _function(call)
        raw = function.get("arguments")
        arguments = raw if isinstance(raw, str) else json.dumps(raw)
        return ToolCall(
            id=self._scrub(call_id), name=self._scrub(str(function.get("name"))), arguments=self._scrub(arguments)
        )

    def _text(self, content: Any) -> str | None:
        if content is None:
            return None
        return self._scrub(content if isinstance(content, str) else json.dumps(content))

    def _complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], deadline: float, asked: int
    ) -> dict:
        body = {"model": self.model, "messages": messages, "tools": tools, "tool_choice": "auto", "temperature": 0}
        response = self._post(body, deadline, asked)
        if response.status_code >= 400:
            raise _Unusable(f"the LLM endpoint answered HTTP {response.status_code}{_error_detail(response)}")
        try:
            message = _strict_json(response.content)["choices"][0]["message"]
        except ValueError:
            raise _Unusable("the LLM endpoint's reply is not JSON") from None
        except (KeyError, IndexError, TypeError):
            raise _Unusable("the LLM endpoint's reply has no choices[0].message: it is not a chat completion") from None
        if not isinstance(message, dict):
            raise _Unusable("the LLM endpoint's choices[0].message is not an object")
        return message

    def _post(self, body: dict[str, Any], deadline: float, asked: int) -> httpx.Response:
        """The endpoint's reply to one request, waited for no later than `deadline` (`asked`: requests before it).

        httpx's timeout bounds each phase of a request (connecting, each read), not the whole of it: a server that
        sends its reply a byte at a time would hold a plain `post` far past any timeout. So the request runs in a
        thread of its own that reads the reply in chunks and stops at the deadline, and the decision waits for it
        only until then; the thread ends by itself within one read timeout, its client with it.
        """
        left = max(0.0, deadline - time.monotonic())
        limit = min(self.timeout_s, left)
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        outcome: dict[str, Any] = {}

        def post() -> None:
            try:
                with (
                    httpx.Client(timeout=limit, headers=headers, transport=self._transport) as client,
                    client.stream("POST", f"{self.url}/chat/completions", json=body) as response,
                ):
                    chunks, size = [], 0
                    for chunk in response.iter_bytes():
                        chunks.append(chunk)
                        size += len(chunk)
                        if size > MAX_REPLY_BYTES:
                            outcome["too_big"] = True
                            return
                        if time.monotonic() > deadline:
                            return
                    # The body as read (decoded), with what the checks need of the headers: its charset.
                    kept = {k: v for k, v in response.headers.items() if k.lower() == "content-type"}
                    outcome["response"] = httpx.Response(response.status_code, headers=kept, content=b"".join(chunks))
            except Exception as err:  # noqa: BLE001 (handed to the deciding thread, which names it)
                outcome["error"] = err

        worker = threading.Thread(target=post, name="vcpilot-llm-request", daemon=True)
        worker.start()
        worker.join(left)
        err = outcome.get("error")
        if outcome.get("too_big"):
            raise _Unusable(f"the LLM endpoint's reply is larger than {MAX_REPLY_BYTES // 1024} KiB: not one answer")
        if worker.is_alive() or not outcome or (isinstance(err, httpx.TimeoutException) and limit < self.timeout_s):
            raise _Unusable(self._late(asked + 1))
        if isinstance(err, httpx.TimeoutException):
            raise _Unusable(f"the LLM endpoint timed out after {self.timeout_s:g} s")
        if isinstance(err, httpx.HTTPError):
            raise _Unusable(f"the LLM endpoint at {_display(self.url)} could not be reached ({err})")
        if err is not None:
            raise err
        response: httpx.Response = outcome["response"]
        return response

    def _late(self, asked: int) -> str:
        return (
            f"the LLM did not decide within the deadline of {self.guardrails.llm_deadline_s:g} s per decision "
            f"(guardrail llm_deadline_s), after {asked} request{'s' if asked != 1 else ''} to the endpoint"
        )

    def _run_tool(self, call: dict[str, Any], offered: set[str], refusals: list[str]) -> str:
        name = str(_function(call).get("name"))
        tool = TOOLS.get(name)
        if name not in offered and tool is not None and tool.mutating:
            # Never run, whatever the guardrails' read-only switch says: a policy decides, the pipeline acts.
            refusals.append(f"the LLM called {name}, which changes the cluster: the LLM policy only reads")
            result: dict[str, Any] = {"ok": False, "error": f"{name} cannot be called: it changes the cluster"}
        elif name not in offered:
            result = {"ok": False, "error": f"{name} cannot be called: it is not offered"}
        else:
            try:
                arguments = _arguments(call)
            except ValueError as err:
                result = {"ok": False, "error": f"the arguments are {err}"}
            else:
                assert self.tools_context is not None  # tools are offered only with a context
                outcome = call_tool(self.tools_context, name, arguments)
                if outcome.rule:
                    refusals.append(outcome.error)
                result = outcome.model_dump(mode="json", exclude_defaults=True)
        return render_tool_result(name, result)

    def _check(self, call: dict[str, Any], observation: Observation, stage: Stage, transcript: _Transcript) -> Action:
        """The answer's action when every check passes, in order; each verdict goes into the transcript."""
        try:
            action = parse_action(_arguments(call))
        except ValueError as err:
            transcript.check("action", self._scrub(str(err)))
            raise _Unusable(f"the LLM's decide arguments are {err}") from None
        transcript.check("action")
        if action.kind not in ALLOWED_KINDS[stage]:
            transcript.check("stage", f"{action.kind} is not allowed at {stage}, which takes {_either(stage)}")
            raise _Unusable(f"the LLM answered {action.kind} at {stage}, which takes only {_either(stage)}")
        transcript.check("stage")
        try:
            self.guardrails.check_action(action, observation.request)
        except GuardrailViolation as err:
            transcript.check("guardrails", self._scrub(str(err)))
            if err.rule in _GPU_RULES and not isinstance(action, Wait | Abort):
                reason = f"the LLM's action asks {action.gpus} GPUs: refused by guardrail {err.rule}"
            else:
                reason = f"the LLM's {action.kind} action was {err}"
            raise _Unusable(reason, str(err)) from None
        transcript.check("guardrails")
        try:
            check_answer(action, observation, stage)
        except ValueError as err:
            transcript.check("invariants", self._scrub(str(err)))
            raise _Unusable(f"the LLM's action was refused: {err}", str(err)) from None
        rules = self.fallback if isinstance(self.fallback, RulePolicy) else RulePolicy()
        if not isinstance(action, Wait | Abort):
            # The run band is arithmetic on the estimate too: the model may leave it out, not pick another.
            band = rules.priority_class(observation, action.gpus, action.queue)
            if action.priority_class not in ("", observation.request.priority_class, band):
                why = (
                    f"the action's priority class {action.priority_class!r} is not the run's, nor its run band {band!r}"
                )
                transcript.check("invariants", self._scrub(why))
                raise _Unusable(f"the LLM's action was refused: {why}", why)
            action = action.model_copy(update={"priority_class": band})
        if not isinstance(action, Wait | Abort) and action.checkpoint_every:
            # The interval is arithmetic on measured facts, not the model's to pick: the rules' figure or the run's.
            expected = rules.checkpoint_every(observation, action.gpus)
            if action.checkpoint_every != expected:
                why = (
                    f"the action checkpoints every {action.checkpoint_every} steps, not the rules' {expected} "
                    "(0: the run's checkpoint-every)"
                )
                transcript.check("invariants", self._scrub(why))
                raise _Unusable(f"the LLM's action was refused: {why}", why)
        transcript.check("invariants")
        return _as_data(action)

    def _scrub(self, text: str) -> str:
        return redact_text(text.replace(self._api_key, MASK) if self._api_key else text)


def _as_data(action: Action) -> Action:
    """The model's own words in an action it may take, as data: escaped and cut as every quoted field is.

    Its rationale and reason reach a terminal (`vcpilot runs show`), the step's log and an MLflow tag.
    """
    update: dict[str, Any] = {
        "rationale": printable(action.rationale),
        "candidates": [c.model_copy(update={"note": printable(c.note)}) for c in action.candidates],
    }
    if isinstance(action, Wait | Abort):
        update["reason"] = printable(action.reason)
    return action.model_copy(update=update)


def _either(stage: Stage) -> str:
    *rest, last = ALLOWED_KINDS[stage]
    return f"{', '.join(rest)} or {last}" if rest else last


def _function(call: Any) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    return function if isinstance(function, dict) else {}


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call's arguments: a JSON object, sent as text by the API (some servers send the object itself)."""
    raw = _function(call).get("arguments")
    if isinstance(raw, str):
        try:
            raw = _strict_json(raw or "{}")
        except ValueError as err:
            raise ValueError(f"not valid JSON: {printable(str(err), 100)}") from None
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    return raw


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is beyond what a JSON number may hold here")
    return value


def _strict_json(text: str | bytes) -> Any:
    """JSON as RFC 8259 has it: Python's `NaN` and `Infinity` extensions are refused, and so is `1e999` (inf).

    Whatever is read from the model may be sent back to it in the next request, whose encoder refuses them: a
    tool call's arguments sent as an object with `1e999` in them stopped the decision with a ValueError. A key
    given twice (`{"action": "wait", "action": "abort"}`: which one the model meant, RFC 8259 leaves open) is
    refused too, not read as its last.
    """
    return loads_json(text, parse_constant=_refuse_constant, parse_float=_finite, object_pairs_hook=unique_keys)


def _error_detail(response: httpx.Response) -> str:
    """The error message an OpenAI-style API puts in its body, one line, short."""
    try:
        detail = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        detail = response.text
    detail = " ".join(str(detail).split())[:200]
    return f" ({detail})" if detail else ""


def _display(url: str) -> str:
    """The URL without user info or query, where a key could hide."""
    try:
        return str(httpx.URL(url).copy_with(userinfo=b"", query=None))
    except (httpx.InvalidURL, TypeError):
        return "<invalid URL>"
