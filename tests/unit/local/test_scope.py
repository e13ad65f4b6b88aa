"""Scopes and loops: the variables a template sees, in Argo's spelling."""

from __future__ import annotations

import json

import pytest

from pipelines.local.engine.scope import (
    MAX_LOOP_ITEMS,
    absent_outputs,
    aggregate_vars,
    drop_absent_arguments,
    expand_items,
    item_name,
    item_vars,
    node_vars,
    result_referenced,
    template_outputs,
    unresolved_refs,
)
from pipelines.local.engine.status import NodeStatus, Outputs, Parameter
from pipelines.local.expressions import ExpressionError
from pipelines.local.workflow import WorkflowError


def node(name: str, phase: str = "Succeeded", result: str | None = None, **params: str) -> NodeStatus:
    outputs = Outputs(result=result, parameters=[Parameter(name=k, value=v) for k, v in params.items()] or None)
    return NodeStatus(id=name, name=name, displayName=name, type="Pod", phase=phase, outputs=outputs)


def test_item_names_follow_argo() -> None:
    assert item_name("print", 0, '"hello (world)"') == "print(0:hello world)"
    assert item_name("n", 3, "4") == "n(3:4)"
    assert item_name("m", 1, '{"num":"2","evenness":"even"}') == "m(1:evenness:even,num:2)"


def test_item_vars() -> None:
    assert item_vars("7") == {"item": "7"}
    assert item_vars("true") == {"item": "true"}
    assert item_vars('{"b":1,"a":"x"}') == {"item.b": "1", "item.a": "x", "item": '{"a":"x","b":1}'}


def test_expand_items() -> None:
    assert expand_items({"template": "x"}) is None
    assert expand_items({"withParam": "[1, 2]"}) == ["1", "2"]
    assert expand_items({"withItems": ["a", 1e3, {"k": True}]}) == ['"a"', "1000", '{"k":true}']
    assert expand_items({"withSequence": {"count": "3", "start": "1", "format": "n%02d"}}) == [
        '"n01"',
        '"n02"',
        '"n03"',
    ]
    assert expand_items({"withSequence": {"start": "3", "end": "1"}}) == ['"3"', '"2"', '"1"']
    with pytest.raises(WorkflowError, match="could not be parsed as a JSON list"):
        expand_items({"withParam": "heads"})
    with pytest.raises(WorkflowError, match="could not be parsed as a JSON list"):  # too deep for Python's parser
        expand_items({"withParam": "[" * 50_000 + "]" * 50_000})


def _substituted(holder: dict) -> list[tuple[str, dict[str, str]]]:
    return [(item_name("s", i, item), item_vars(item)) for i, item in enumerate(expand_items(holder) or [])]


def test_with_param_items_keep_their_json_text_as_argo_does() -> None:
    # wfv1.Item is a json.RawMessage: a number reads as the parameter spells it (Python read 2.50 as 2.5, 1e3 as
    # 1000); 1e999, which no float64 holds, is neither a number nor a string to GetType/GetStrVal: "" (was Infinity)
    param = '[2.50, 1e3, -0, 1e999, "caf\\u00e9", true, null, [1, "a<b"]]'
    assert _substituted({"withParam": param}) == [
        ("s(0:2.50)", {"item": "2.50"}),
        ("s(1:1e3)", {"item": "1e3"}),
        ("s(2:-0)", {"item": "-0"}),
        ("s(3:1e999)", {"item": ""}),
        ("s(4:caf\\u00e9)", {"item": "café"}),  # decoded (GetStrVal); its name keeps the escape
        ("s(5:true)", {"item": "true"}),
        ("s(6:[])", {"item": "null"}),  # GetType says List; a nil slice: named [], written null
        ("s(7:[1 a<b])", {"item": '[1,"a\\u003cb"]'}),  # json.Marshal of []Item: HTML escapes
    ]


def test_map_items_keep_their_values_json_text_as_argo_does() -> None:
    # argo-workflows#3409 (won't fix): item.KEY is Item.String() of the value, its JSON text with a string's quotes
    # removed and its escapes kept; {{item}} is json.Marshal of map[string]Item (sorted keys, HTML escapes)
    expected = {
        "item.q": 'a\\"b\\nc',
        "item.u": "\\u00e9",
        "item.n": "2.50",
        "item.h": "<&>",
        "item.l": '[1,"x"]',
        "item": '{"h":"\\u003c\\u0026\\u003e","l":[1,"x"],"n":2.50,"q":"a\\"b\\nc","u":"\\u00e9"}',
    }
    param = '[{"q": "a\\"b\\nc", "u": "\\u00e9", "n": 2.50, "h": "<&>", "l": [1, "x"]}]'
    [(name, scope)] = _substituted({"withParam": param})
    assert scope == expected
    assert name == 's(0:h:<&>,l:[1,"x"],n:2.50,q:a\\"b\\nc,u:\\u00e9)'
    # withItems as the API server hands the workflow to the controller: Go's JSON of each value
    [(_, scope)] = _substituted({"withItems": [{"q": 'a"b\nc', "n": 1000.0}]})
    assert scope == {"item.q": 'a\\"b\\nc', "item.n": "1000", "item": '{"n":1000,"q":"a\\"b\\nc"}'}
    # a key given twice keeps the last value, as a Go map does
    assert _substituted({"withParam": '[{"k": 1, "k": 2}]'}) == [("s(0:k:2)", {"item.k": "2", "item": '{"k":2}'})]


def test_a_sequence_format_must_make_a_json_string() -> None:
    with pytest.raises(WorkflowError, match="not JSON"):
        expand_items({"withSequence": {"count": "1", "format": 'a"%d'}})


@pytest.mark.parametrize(
    "holder",
    [
        {"withSequence": {"count": "1000000000"}},  # once 10 GB in a minute, before a node ran
        {"withSequence": {"start": "-5", "end": str(MAX_LOOP_ITEMS)}},
        {"withParam": json.dumps(list(range(MAX_LOOP_ITEMS + 1)))},
        {"withItems": list(range(MAX_LOOP_ITEMS + 1))},
    ],
)
def test_a_loop_beyond_what_a_workflow_can_hold_is_refused_before_it_expands(holder: dict) -> None:
    with pytest.raises(WorkflowError, match=f"a loop may have at most {MAX_LOOP_ITEMS:,} here") as caught:
        expand_items(holder)
    assert "expands to" in str(caught.value) and "\n" not in str(caught.value)
    assert len(expand_items({"withSequence": {"count": str(MAX_LOOP_ITEMS)}}) or []) == MAX_LOOP_ITEMS


@pytest.mark.parametrize("count", [" 3", "3 ", "1_000", "３", "0x10"])
def test_a_sequence_reads_its_numbers_as_go_does(count: str) -> None:
    with pytest.raises(WorkflowError, match="has a value that is not an integer"):
        expand_items({"withSequence": {"count": count}})


def test_a_sequence_takes_a_number_as_json_has_it_and_refuses_one_past_an_int64() -> None:
    # YAML's `count: 1e3` is the float 1000.0 (go-yaml too), which Argo's IntOrString reads as 1000: it was refused
    assert len(expand_items({"withSequence": {"count": 1e3}}) or []) == 1000
    # a ValueError (Python's int() refuses 4,300 digits): an internal error of the step
    with pytest.raises(WorkflowError, match="has a value that is not an integer"):
        expand_items({"withSequence": {"count": "1" * 5000}})


@pytest.mark.parametrize("value", ["[NaN]", "[1, Infinity]", "[-Infinity]"])
def test_with_param_reads_json_as_go_does(value: str) -> None:
    # Python's json took these and the loop ran; Go's encoding/json refuses them, and Argo's step errs
    with pytest.raises(WorkflowError, match="could not be parsed as a JSON list"):
        expand_items({"withParam": value})


def test_aggregates_keep_loop_order_and_skip_failures() -> None:
    children = [
        node("t(10:c)", result='{"k": 1}', num="10"),
        node("t(2:b)", result="plain", num="2"),
        node("t(0:a)", phase="Failed", result="x", num="0"),
    ]
    scope = aggregate_vars("tasks", "t", children)
    assert json.loads(scope["tasks.t.outputs.parameters"]) == [{"num": "2"}, {"num": "10"}]
    assert json.loads(scope["tasks.t.outputs.parameters.num"]) == ["2", "10"]
    assert json.loads(scope["tasks.t.outputs.result"]) == ["plain", {"k": 1}]


def test_node_vars() -> None:
    scope = node_vars("steps", "gen", node("wf.gen", result="42", out="v"))
    assert scope["steps.gen.outputs.result"] == "42"
    assert scope["steps.gen.outputs.parameters.out"] == "v"
    assert scope["steps.gen.status"] == "Succeeded"


def test_absent_optionals_drop_pure_references() -> None:
    skipped = NodeStatus(id="s", name="s", displayName="s", type="Skipped", phase="Skipped")
    template = {"outputs": {"parameters": [{"name": "a"}, {"name": "b", "valueFrom": {"default": "d"}}]}}
    scope = absent_outputs("tasks", "s", skipped, template)
    assert scope == {"tasks.s.outputs.parameters.a": None, "tasks.s.outputs.parameters.b": "d"}
    task = {"arguments": {"parameters": [{"name": "x", "value": "{{tasks.s.outputs.parameters.a}}"}, {"name": "y"}]}}
    assert drop_absent_arguments(task, scope)["arguments"]["parameters"] == [{"name": "y"}]


def test_template_outputs_from_children() -> None:
    template = {
        "outputs": {
            "parameters": [
                {"name": "pick", "valueFrom": {"expression": "tasks.a.outputs.result == 'x' ? 'yes' : 'no'"}},
                {"name": "copy", "valueFrom": {"parameter": "{{tasks.a.outputs.result}}"}},
                {"name": "fallback", "valueFrom": {"parameter": "{{tasks.gone.outputs.result}}", "default": "d"}},
            ]
        }
    }
    outputs = template_outputs(template, {"tasks.a.outputs.result": "x"})
    assert outputs is not None
    assert {p.name: p.value for p in outputs.parameters or []} == {"pick": "yes", "copy": "x", "fallback": "d"}
    with pytest.raises(ExpressionError):
        template_outputs({"outputs": {"parameters": [{"name": "p", "valueFrom": {"parameter": "{{nope}}"}}]}}, {})


def test_an_expression_output_is_printed_as_argo_prints_any_value() -> None:
    # Argo's ParseAnyString is fmt's %v: a loop's `steps.s.outputs.parameters` map reads `map[k:v]`, not JSON
    def value(expression: str) -> str | None:
        template = {"outputs": {"parameters": [{"name": "p", "valueFrom": {"expression": expression}}]}}
        outputs = template_outputs(
            template, {"steps.s.outputs.parameters.o": '["3","2"]', "steps.s.outputs.parameters": "[]"}
        )
        assert outputs is not None and outputs.parameters
        return outputs.parameters[0].value

    assert value("steps.s.outputs.parameters") == 'map[o:["3","2"]]'
    assert value("[1, 'a', true]") == "[1 a true]"
    assert value("1.5 * 2") == "3"
    assert value("1e21") == "1e+21"


def test_unresolved_refs() -> None:
    assert unresolved_refs({"a": ["{{tasks.x.outputs.result}} and {{item}}"]}) == ["tasks.x.outputs.result"]


@pytest.mark.parametrize(
    ("text", "referenced"),
    [
        ("{{steps.gen.outputs.result}}", True),
        ("{{=steps['gen'].outputs.result}}", True),
        ('{{=steps["gen"].outputs.result}}', False),  # Argo's regex runs on the template as JSON, quotes escaped
        ("{{steps.gen.outputs.parameters.x}}", False),
        ("{{steps.generate.outputs.result}}", False),
        ("{{tasks.gen.outputs.result}}", False),
    ],
)
def test_a_result_is_referenced_as_argos_has_output_result_ref_finds_it(text: str, referenced: bool) -> None:
    parent = {"name": "main", "steps": [[{"name": "use", "arguments": {"parameters": [{"name": "p", "value": text}]}}]]}
    assert result_referenced("steps", "gen", parent) is referenced


def test_a_loops_result_that_is_not_json_is_gos_error_only_when_strict() -> None:
    children = [node("x.gen(0:a)", "Succeeded", "hello")]
    assert aggregate_vars("steps", "gen", children)["steps.gen.outputs.result"] == '["hello"]'
    with pytest.raises(ExpressionError, match="^invalid character 'h' looking for beginning of value$"):
        aggregate_vars("steps", "gen", children, strict=True)
    children = [node("x.gen(0:a)", "Succeeded", "")]
    with pytest.raises(ExpressionError, match="^unexpected end of JSON input$"):
        aggregate_vars("steps", "gen", children, strict=True)
