"""The variables a template sees (`{{tasks.A.outputs.result}}`, `{{item.key}}`, ...) and loop expansion.

Scopes are flat dicts keyed like Argo's placeholders ("tasks.A.outputs.parameters.x", "item", "retries"); the
expression module turns them into nested maps where an expression needs them. Everything here is pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from components.untrusted import loads_json
from pipelines.local.engine.status import ARTIFACT_MARK, Artifact, NodeStatus, Outputs, Parameter
from pipelines.local.expressions import ExpressionError, evaluate_expr, substitute
from pipelines.local.govalues import go_json, go_sprint
from pipelines.local.workflow import WorkflowError, stringify

__all__ = [
    "absent_outputs",
    "artifact_local",
    "aggregate_vars",
    "drop_absent_arguments",
    "expand_items",
    "item_name",
    "item_vars",
    "node_vars",
    "resolve_artifact_arguments",
    "result_referenced",
    "substitute_tree",
    "template_outputs",
    "unresolved_refs",
]


def substitute_tree(value: Any, scope: Mapping[str, Any], *, strict: bool = False, skip: Iterable[str] = ()) -> Any:
    """A copy of a YAML tree with every `{{...}}` in its strings replaced; keys in `skip` are left untouched."""
    skipped = frozenset(skip)
    if isinstance(value, str):
        return substitute(value, scope, strict=strict) if "{{" in value else value
    if isinstance(value, Mapping):
        return {
            k: (v if k in skipped else substitute_tree(v, scope, strict=strict, skip=skipped)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [substitute_tree(v, scope, strict=strict, skip=skipped) for v in value]
    return value


def unresolved_refs(value: Any, prefixes: tuple[str, ...] = ("tasks.", "steps.")) -> list[str]:
    """`{{tasks.…}}`/`{{steps.…}}` tags still left in a tree after a lenient substitution."""
    found: list[str] = []
    if isinstance(value, str):
        start = value.find("{{")
        while start != -1:
            end = value.find("}}", start)
            if end == -1:
                break
            tag = value[start + 2 : end].strip()
            if tag.startswith(prefixes) or (tag.startswith("=") and any(p.rstrip(".") in tag for p in prefixes)):
                found.append(tag)
            start = value.find("{{", end)
    elif isinstance(value, Mapping):
        for v in value.values():
            found += unresolved_refs(v, prefixes)
    elif isinstance(value, list):
        for v in value:
            found += unresolved_refs(v, prefixes)
    return found


def node_vars(prefix: str, name: str, node: NodeStatus) -> dict[str, Any]:
    """`<prefix>.<name>.{id,status,startedAt,finishedAt,hostNodeName,outputs.*}` for one task or step node.

    Of a retried one, pass its last attempt (`RunState.last_attempt`), as Argo's buildLocalScope reads it.
    """
    base = f"{prefix}.{name}"
    out: dict[str, Any] = {f"{base}.id": node.id, f"{base}.status": node.phase}
    if node.started_at:
        out[f"{base}.startedAt"] = node.started_at
    if node.finished_at:
        out[f"{base}.finishedAt"] = node.finished_at
    if node.host_node_name:
        out[f"{base}.hostNodeName"] = node.host_node_name
    outputs = node.outputs
    if outputs is not None:
        if outputs.result is not None:
            out[f"{base}.outputs.result"] = outputs.result
        if outputs.exit_code is not None:
            out[f"{base}.exitCode"] = outputs.exit_code  # Argo v4: steps.NAME.exitCode (util/variables/keys)
        for p in outputs.parameters or []:
            if p.value is not None:
                out[f"{base}.outputs.parameters.{p.name}"] = p.value
        for a in outputs.artifacts or []:
            out[f"{base}.outputs.artifacts.{a.name}"] = a.reference
    return out


def absent_outputs(prefix: str, name: str, node: NodeStatus, template: Mapping[str, Any] | None) -> dict[str, Any]:
    """Argo's addSkippedNodeOutputsToScope: a Skipped/Omitted node's declared outputs, its default or None.

    None marks an absent optional: substituting it fails with a clear message, and an argument that is
    nothing but a reference to it is dropped (see `drop_absent_arguments`).
    """
    if template is None or node.outputs is not None or node.phase not in ("Skipped", "Omitted"):
        return {}
    out: dict[str, Any] = {}
    for param in (template.get("outputs") or {}).get("parameters") or []:
        default = (param.get("valueFrom") or {}).get("default")
        out[f"{prefix}.{name}.outputs.parameters.{param['name']}"] = None if default is None else stringify(default)
    return out


def drop_absent_arguments(holder: Mapping[str, Any], scope: Mapping[str, Any]) -> dict[str, Any]:
    """The step/task without arguments that only reference an absent optional, so that input defaults apply."""
    params = (holder.get("arguments") or {}).get("parameters")
    if not params:
        return dict(holder)
    kept = []
    for param in params:
        value = param.get("value")
        if isinstance(value, str) and value.startswith("{{") and value.endswith("}}"):
            key = value[2:-2].strip()
            if key in scope and scope[key] is None:
                continue
        kept.append(param)
    return {**holder, "arguments": {**holder["arguments"], "parameters": kept}}


def result_referenced(prefix: str, name: str, parent: Mapping[str, Any]) -> bool:
    """Argo's hasOutputResultRef: whether the steps or DAG template `parent` names `{prefix}.{name}.outputs.result`.

    Argo has a step's stdout captured as its result only then, and so aggregates a loop's results only then.
    """
    text = json.dumps(parent)
    quoted = re.escape(name)
    return (
        re.search(rf"{prefix}\.{quoted}\.outputs\.result", text) is not None
        # as Argo's, on the template as JSON: `steps['x']` matches, `steps["x"]` (its quotes escaped) does not
        or re.search(rf"{prefix}\[['\"]{quoted}['\"]\]\.outputs.result", text) is not None
    )


def _go_json_error(text: str) -> str:
    """What Go's encoding/json says of a text that is not JSON (its common cases; others in Python's words)."""
    stripped = text.lstrip(" \t\r\n")
    if not stripped:
        return "unexpected end of JSON input"
    if stripped[0] not in '{["-0123456789tfn':
        return f"invalid character {stripped[0]!r} looking for beginning of value"
    try:
        json.loads(text)
    except ValueError as err:
        return f"invalid JSON: {err}"
    return "invalid JSON"


def aggregate_vars(prefix: str, name: str, children: list[NodeStatus], strict: bool = False) -> dict[str, Any]:
    """Argo's processAggregateNodeOutputs: the outputs of an expanded task/step as JSON lists, in loop order.

    With `strict` (the parent names the loop's result: `result_referenced`), a `result` that is not JSON is an
    ExpressionError in Go's words, as Argo errs the template; otherwise it is aggregated as a string (Argo has not
    captured it, and nothing reads it).
    """
    kept = sorted((c for c in children if not c.hooked and not c.retried), key=lambda c: _loop_index(c.name))
    params: list[dict[str, str]] = []
    by_name: dict[str, list[str]] = {}
    results: list[Any] = []
    for child in kept:
        if child.outputs is None or child.phase != "Succeeded":
            continue
        if child.outputs.parameters:
            entry = {p.name: p.value or "" for p in child.outputs.parameters}
            params.append(entry)
            for key, value in entry.items():
                by_name.setdefault(key, []).append(value)
        if child.outputs.result is not None:
            try:
                results.append(loads_json(child.outputs.result))
            except ValueError:
                if strict:
                    raise ExpressionError(_go_json_error(child.outputs.result)) from None
                results.append(child.outputs.result)
    base = f"{prefix}.{name}.outputs"
    out: dict[str, Any] = {f"{base}.result": _json(results), f"{base}.parameters": _json(params)}
    for key, values in by_name.items():
        out[f"{base}.parameters.{key}"] = _json(_maybe_structured(values))
    return out


def _maybe_structured(values: list[str]) -> list[Any]:
    """Argo's aggregatedJSONValueList: values that are all JSON objects/lists are embedded, else kept as strings."""
    parsed: list[Any] = []
    for value in values:
        try:
            item = loads_json(value)
        except ValueError:
            return values
        if not isinstance(item, dict | list):
            return values
        parsed.append(item)
    return parsed


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _loop_index(name: str) -> int:
    tail = name.rsplit("(", 1)[-1]
    try:
        return int(tail.split(":", 1)[0].rstrip(")"))
    except ValueError:
        return 0


# The most items one loop may expand to. Every item is a node of the run, and Argo keeps every node in the
# Workflow's status, which may hold 1 MB compressed (MAX_WORKFLOW_SIZE) unless node status offloading is on: far
# fewer nodes than this. A `withSequence: {count: "1000000000"}` typo took this runner 10 GB in a minute.
MAX_LOOP_ITEMS = 100_000


def _bounded(items: list[Any], field: str) -> list[Any]:
    if len(items) > MAX_LOOP_ITEMS:
        raise WorkflowError(_too_many(len(items), field))
    return items


def _too_many(count: int, field: str) -> str:
    return (
        f"{field} expands to {count:,} items; a loop may have at most {MAX_LOOP_ITEMS:,} here (each item is a node "
        "of the workflow, and Argo keeps every node in the Workflow's status, 1 MB compressed): split the work"
    )


def _not_json(word: str) -> Any:
    raise ValueError(f"{word} is not JSON")


def expand_items(holder: Mapping[str, Any]) -> list[str] | None:
    """The items a step/task loops over (withItems, withParam, withSequence), or None when it does not loop.

    Each item is its JSON text, as Argo's wfv1.Item holds it (a json.RawMessage): withItems as the API server wrote
    the workflow (Go's JSON of the values), withParam as the parameter spells it, withSequence a quoted string.
    """
    if holder.get("withItems") is not None:
        return [_go_raw(item, "withItems") for item in _bounded(list(holder["withItems"]), "withItems")]
    if holder.get("withParam") is not None:
        raw = holder["withParam"]
        if isinstance(raw, list):
            return [_go_raw(item, "withParam") for item in _bounded(raw, "withParam")]
        text = str(raw)
        try:  # as Go's encoding/json: NaN and Infinity are no JSON
            items = loads_json(text, parse_constant=_not_json)
        except ValueError:
            items = None
        if not isinstance(items, list):
            shown = " ".join(text.split())[:120]
            raise WorkflowError(f"withParam value could not be parsed as a JSON list: {shown}.")
        return _bounded(_raw_parts(_compact(text)), "withParam")
    if holder.get("withSequence") is not None:
        return [_quoted(text, holder["withSequence"]) for text in _sequence(holder["withSequence"])]
    return None


def _sequence(seq: Mapping[str, Any]) -> list[str]:
    def whole(value: Any) -> int:  # Go's strconv.Atoi of the IntOrString: ASCII digits and a sign, nothing else
        text = stringify(value)  # a number as JSON has it: YAML's `1e3` is 1000
        found = re.fullmatch(r"([+-]?)0*(\d{1,19})", text, re.ASCII)  # past 19 digits no int64 (nor Python int())
        if found is None or not -(2**63) <= int(found[1] + found[2]) < 2**63:
            raise WorkflowError(f"withSequence {dict(seq)} has a value that is not an integer (an int64).")
        return int(found[1] + found[2])

    start = whole(seq.get("start", 0))
    if seq.get("end") is not None:
        end = whole(seq["end"])
    elif seq.get("count") is not None:
        count = whole(seq["count"])
        if count == 0:
            return []
        end = start + count - 1
    else:
        raise WorkflowError("withSequence needs end or count.")
    if abs(end - start) + 1 > MAX_LOOP_ITEMS:
        raise WorkflowError(_too_many(abs(end - start) + 1, "withSequence"))
    fmt = seq.get("format") or "%d"
    step = 1 if start <= end else -1
    try:
        return [fmt % i for i in range(start, end + step, step)]
    except (TypeError, ValueError):
        raise WorkflowError(f"withSequence format {fmt!r} is not a printf format for an integer.") from None


def item_vars(item: str) -> dict[str, Any]:
    r"""`item` (and `item.<key>` for maps) as Argo's processItem substitutes them, from the item's JSON text.

    Its quirks are kept (argo-workflows#3409, a "won't fix"): a map's `item.<key>` is the value's JSON text without
    the quotes, its escapes left in (`a\"b` for a"b), and `{{item}}` of a map or list is Go's JSON of it.
    """
    kind = _item_kind(item)
    if kind == "map":
        members = _members(item)
        out: dict[str, Any] = {f"item.{k}": _item_text(v) for k, v in members.items()}
        out["item"] = "{" + ",".join(f"{go_json(k)}:{_html_escaped(members[k])}" for k in sorted(members)) + "}"
        return out
    if kind == "list":  # null unmarshals into a nil slice: Go's JSON of it is null again (its node is named [])
        return {"item": "null" if item == "null" else "[" + ",".join(_html_escaped(e) for e in _elements(item)) + "]"}
    return {"item": _str_value(item) if kind == "string" else _item_text(item)}


def item_name(name: str, index: int, item: str) -> str:
    """Argo's generateNodeName: `name(index:description)` with parentheses removed from the description."""
    kind = _item_kind(item)
    if kind == "map":
        desc = ",".join(sorted(f"{k}:{_item_text(v)}" for k, v in _members(item).items()))
    elif kind == "list":
        desc = "[" + " ".join(_item_text(e) for e in _elements(item)) + "]"
    else:  # Item.String(), a string's escapes kept: processItem names a string item by the item, not GetStrVal
        desc = _item_text(item)
    return f"{name}({index}:{desc.replace('(', '').replace(')', '')})"


# The tokens of JSON text that matter for splitting it: a string (escapes and all), a bracket, a comma, a colon.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},:]')
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def _compact(text: str) -> str:
    """Valid JSON text without the whitespace between its tokens (encoding/json's compact)."""
    return re.sub(r'("(?:[^"\\]|\\.)*")|[ \t\n\r]+', lambda m: m.group(1) or "", text)


def _raw_parts(compact: str) -> list[str]:
    """The elements of a compact JSON array, or the `"key":value` members of an object, each as its text."""
    parts, depth, start = [], 0, 1
    for token in _JSON_TOKEN.finditer(compact):
        first = token.group()[0]
        if first in "[{":
            depth += 1
        elif first in "]}":
            depth -= 1
        if (first == "," and depth == 1) or depth == 0:
            if token.start() > start:
                parts.append(compact[start : token.start()])
            start = token.end()
    return parts


def _go_raw(value: Any, field: str) -> str:
    try:
        return go_json(value)
    except ValueError as err:  # NaN, infinities: no JSON holds them, the API server would not take the workflow
        raise WorkflowError(f"{field} holds an item JSON cannot hold ({err}).") from None


def _quoted(text: str, seq: Mapping[str, Any]) -> str:
    """A withSequence item: `"` + the formatted number + `"`, which must read as JSON (wfv1.ParseItem)."""
    raw = f'"{text}"'
    try:
        json.loads(raw)
    except ValueError:
        raise WorkflowError(
            f"withSequence format {seq.get('format')!r} makes {raw}, which is not JSON: an item must read as a "
            "JSON string."
        ) from None
    return raw


def _finite(number: str) -> float:
    value = float(number)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {number} is out of range")  # Go's float64 cannot hold it
    return value


def _item_kind(raw: str) -> str:
    """wfv1.Item.GetType, in its order: a number, a bool, a list (`null` too), a map, else a string."""
    if _JSON_NUMBER.fullmatch(raw):
        try:
            _finite(raw)
            return "number"
        except ValueError:
            return "string"  # strconv.ParseFloat's range error; and json cannot read it as a string either
    if raw in ("true", "false"):
        return "bool"
    if raw == "null" or raw[:1] in "[{":
        try:  # json.Unmarshal into []any / map[string]any: a float64 past range anywhere fails it
            json.loads(raw, parse_float=_finite, parse_int=_finite)
        except ValueError:
            return "string"
        return "list" if raw[:1] != "{" else "map"
    return "string"


def _elements(raw: str) -> list[str]:
    return _raw_parts(raw) if raw != "null" else []


def _members(raw: str) -> dict[str, str]:
    """GetMapVal: each key (decoded) to its value's text; a key given twice keeps its last value, as Go's map."""
    members = {}
    for member in _raw_parts(raw):
        key = re.match(r'"(?:[^"\\]|\\.)*"', member)
        assert key is not None  # a member of valid JSON starts with its key
        members[_valid_utf8(json.loads(key.group()))] = member[key.end() + 1 :]
    return members


def _item_text(raw: str) -> str:
    """Item.String(): the JSON text, a string's quotes removed (its escapes kept), `<`, `>`, `&` unescaped."""
    text = raw.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    text = text[1:-1] if text.startswith('"') else text
    return text.replace("\\u003c", "<").replace("\\u003e", ">").replace("\\u0026", "&")


def _html_escaped(raw: str) -> str:
    """The text encoding/json writes for a RawMessage: `<`, `>`, `&`, U+2028 and U+2029 escaped (in strings only)."""
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        raw = raw.replace(char, escaped)
    return raw


def _str_value(raw: str) -> str:
    """GetStrVal: the decoded string, or "" where the text is no JSON string (errors ignored, as Argo does)."""
    if not raw.startswith('"'):
        return ""
    return _valid_utf8(json.loads(raw))


def _valid_utf8(text: str) -> str:
    return re.sub("[\ud800-\udfff]", "\ufffd", text)  # a lone surrogate escape decodes to U+FFFD in Go


def artifact_local(value: Any, where: str) -> str:
    """Where the run keeps the artifact a `from` names (after substitution); WorkflowError when it names none."""
    if isinstance(value, str) and value.startswith(ARTIFACT_MARK):
        return value[len(ARTIFACT_MARK) :]
    shown = "nothing" if value is None else repr(value)
    raise WorkflowError(
        f"{where} is {shown}, which is not an artifact: it takes a reference such as "
        "{{steps.NAME.outputs.artifacts.NAME}} to an artifact a step has output."
    )


def _artifact_from(spec: Mapping[str, Any], scope: Mapping[str, Any], where: str) -> str:
    """The run's place of the artifact `spec` takes `from` (substituted already) or `fromExpression`."""
    if spec.get("fromExpression"):
        return artifact_local(evaluate_expr(str(spec["fromExpression"]), scope), f"{where}.fromExpression")
    return artifact_local(substitute(str(spec.get("from")), scope, strict=True), f"{where}.from")


def resolve_artifact_arguments(holder: Mapping[str, Any], scope: Mapping[str, Any]) -> dict[str, Any]:
    """The step/task with each artifact argument's `fromExpression` evaluated into `from` (at the caller's scope)."""
    artifacts = (holder.get("arguments") or {}).get("artifacts")
    if not artifacts or not any(a.get("fromExpression") for a in artifacts):
        return dict(holder)
    resolved = [
        {**{k: v for k, v in a.items() if k != "fromExpression"}, "from": f"{ARTIFACT_MARK}{local}"}
        if a.get("fromExpression") and (local := _artifact_from(a, scope, f"artifact argument {a['name']!r}"))
        else a
        for a in artifacts
    ]
    return {**holder, "arguments": {**holder["arguments"], "artifacts": resolved}}


def template_outputs(template: Mapping[str, Any], scope: Mapping[str, Any]) -> Outputs | None:
    """Argo's getTemplateOutputsFromScope: a DAG's or steps template's outputs from its children."""
    specs = (template.get("outputs") or {}).get("parameters") or []
    artifact_specs = (template.get("outputs") or {}).get("artifacts") or []
    if not specs and not artifact_specs:
        return None
    artifacts = [
        Artifact(
            name=a["name"],
            local=_artifact_from(a, scope, f"output artifact {a['name']!r}"),
            globalName=a.get("globalName"),
        )
        for a in artifact_specs
    ]
    params: list[Parameter] = []
    for spec in specs:
        source = spec.get("valueFrom")
        if not source:
            raise WorkflowError(f"output parameter {spec['name']!r} must have a valueFrom.")
        try:
            if source.get("expression"):
                value = evaluate_expr(str(source["expression"]), scope)
                if value is None:
                    raise ExpressionError(f"failed to evaluate expression {source['expression']!r}")
                value = go_sprint(value)  # Argo's ParseAnyString: fmt's %v, so a map reads `map[k:v]`
            elif source.get("parameter"):
                value = substitute(str(source["parameter"]), scope, strict=True)
            else:
                value = source.get("default", "")
        except ExpressionError:
            if source.get("default") is None:
                raise
            value = source["default"]
        params.append(Parameter(name=spec["name"], value=stringify(value), globalName=spec.get("globalName")))
    return Outputs(parameters=params or None, artifacts=artifacts or None)
