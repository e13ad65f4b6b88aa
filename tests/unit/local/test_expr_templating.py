"""`{{...}}` substitution renders what Argo's controller would write into the template."""

from __future__ import annotations

import time
from typing import Any

import pytest

from pipelines.local.expressions import ExpressionError, UnresolvedVariable, expand_scope, substitute

SCOPE: dict[str, Any] = {
    "inputs.parameters.message": "hello",
    "inputs.parameters.n": "5",
    "tasks.flip-coin.outputs.result": "heads",
    "tasks.A.outputs.result": 'line 1\nline "2"',
    "workflow.name": "wf-1",
    "item": "a",
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no tags at all", "no tags at all"),
        ("{{inputs.parameters.message}}", "hello"),
        ("{{ inputs.parameters.message }}!", "hello!"),  # whitespace inside the braces
        ("{{item}}-{{item}}", "a-a"),
        ("{{tasks.flip-coin.outputs.result}}", "heads"),  # hyphens are fine in simple tags
        ("echo '{{tasks.A.outputs.result}}'", "echo 'line 1\nline \"2\"'"),  # inserted as it is
        ("{{=asInt(inputs.parameters.n) * 2}}", "10"),
        ("{{= asInt(inputs.parameters.n) / 2 }}", "2.5"),
        ("{{=sprig.upper(workflow.name)}}", "WF-1"),
        ("{{=tasks['flip-coin'].outputs.result == 'heads' ? 'yes' : 'no'}}", "yes"),
        ("{{=[1, 'a', true]}}", '[1,"a",true]'),  # non-strings render as Go's JSON
        ("{{={'b': 1, 'a': 2}}}", '{"a":2,"b":1}'),  # a map literal ends with "}}}"
        ("{{=toJSON({'a': {'b': 1}})}}", '{\n  "a": {\n    "b": 1\n  }\n}'),
        ("{{='}}' + 'x'}}", "}}x"),  # a quoted "}}" does not end the tag
        ("{{=inputs.parameters.missing ?? 'fallback'}}", "fallback"),
        ("{{=1000000.0}}", "1000000"),  # JSON, not %v
        ("{{=string(1000000.0)}}", "1e+06"),
    ],
)
def test_substitute(text: str, expected: str) -> None:
    assert substitute(text, SCOPE) == expected


RENDERED = [
    (3, "3"),
    (2.5, "2.5"),
    (3.0, "3"),
    (True, "true"),
    ([1, "a"], '[1,"a"]'),
    ({"b": 1, "a": "<"}, '{"a":"\\u003c","b":1}'),
]


@pytest.mark.parametrize(("value", "rendered"), RENDERED)
def test_non_string_values_render_as_json(value: Any, rendered: str) -> None:
    assert substitute("{{item}}", {"item": value}) == rendered


def test_unknown_names_raise_when_strict_and_stay_otherwise() -> None:
    with pytest.raises(UnresolvedVariable, match=r"unable to resolve \{\{tasks\.B\.outputs\.result\}\}") as info:
        substitute("x {{tasks.B.outputs.result}} y", SCOPE)
    assert info.value.variable == "tasks.B.outputs.result"
    assert substitute("x {{tasks.B.outputs.result}} y", SCOPE, strict=False) == "x {{tasks.B.outputs.result}} y"
    assert substitute("{{ tasks.B }} {{item}}", SCOPE, strict=False) == "{{ tasks.B }} a"


def test_expression_tags_with_unknown_names_raise_when_strict_and_stay_otherwise() -> None:
    text = "{{=asInt(tasks.B.outputs.result) + 1}}"
    with pytest.raises(UnresolvedVariable, match="tasks.B") as info:
        substitute(text, SCOPE)
    assert info.value.variable == "tasks.B.outputs.result"
    assert substitute(text, SCOPE, strict=False) == text
    # A failure at run time is left for a later pass too, unless strict.
    assert substitute("{{=asInt(workflow.name)}}", SCOPE, strict=False) == "{{=asInt(workflow.name)}}"
    with pytest.raises(ExpressionError, match="int"):
        substitute("{{=asInt(workflow.name)}}", SCOPE)


def test_an_expression_evaluating_to_nil_is_an_error_when_strict() -> None:
    with pytest.raises(ExpressionError, match="nil"):
        substitute("{{=nil}}", SCOPE)
    assert substitute("{{=nil}}", SCOPE, strict=False) == "{{=nil}}"


def test_a_malformed_expression_is_an_error_even_when_not_strict() -> None:
    with pytest.raises(ExpressionError, match="malformed") as info:
        substitute("{{=1 +}}", SCOPE, strict=False)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("expression", ["sprig.randAlpha(3)", "sprig.upper(sprig.uuidv4())", "now()"])
def test_a_refused_function_is_an_error_even_when_not_strict(expression: str) -> None:
    # left as written before: the step received the literal `{{=sprig.randAlpha(3)}}` and the run succeeded
    with pytest.raises(ExpressionError, match="refuse|do not support"):
        substitute("{{=" + expression + "}}", {}, strict=False)


def test_an_absent_optional_output_cannot_be_substituted() -> None:
    # Argo marks a skipped node's output without default as absent (nil): a simple tag on it is an error...
    scope = {"tasks.B.outputs.parameters.p": None}
    with pytest.raises(ExpressionError, match="skipped or omitted") as info:
        substitute("{{tasks.B.outputs.parameters.p}}", scope, strict=False)
    assert not isinstance(info.value, UnresolvedVariable)
    # ... while an expression can fall back on a default.
    assert substitute("{{=tasks.B.outputs.parameters.p ?? 'none'}}", scope) == "none"


def test_an_unclosed_tag_is_an_error() -> None:
    with pytest.raises(ExpressionError, match="without a closing"):
        substitute("echo {{inputs.parameters.message", SCOPE)


def test_nested_tags_resolve_in_two_passes_like_argo() -> None:
    scope = {"item": "A", "tasks.A.outputs.result": "done"}
    first = substitute("{{tasks.{{item}}.outputs.result}}", scope)
    assert first == "{{tasks.A.outputs.result}}"
    assert substitute(first, scope) == "done"


def test_expand_scope_nests_keys_and_drops_parents_of_children() -> None:
    assert expand_scope({"a.b": 1, "a.c.d": 2, "a.c": "dropped", "e": 3}) == {"a": {"b": 1, "c": {"d": 2}}, "e": 3}


def test_substitution_is_fast_enough_for_every_node() -> None:
    scope = {f"tasks.t{i}.outputs.result": str(i) for i in range(200)} | SCOPE
    text = "echo {{inputs.parameters.message}} {{tasks.t7.outputs.result}} {{=asInt(inputs.parameters.n) + 1}}"
    started = time.perf_counter()
    for _ in range(2000):
        assert substitute(text, scope) == "echo hello 7 6"
    assert time.perf_counter() - started < 2.0
