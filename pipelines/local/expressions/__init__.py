"""The expression layer of the local Argo runner: one import for every dialect Argo evaluates.

- `substitute`: `{{...}}` tags and `{{=expr}}` expressions (util/template);
- `evaluate_expr`: expr-lang, for `valueFrom.expression`, hooks and `retryStrategy.expression`;
- `evaluate_when`: `when`, with govaluate's rules, after substitution;
- `evaluate_depends` / `depends_targets`: DAG `depends` logic;
- `evaluate_condition`: resource templates' label-selector conditions;
- `jsonpath` / `jsonpath_text`: kubectl-style JSONPath for resource outputs (the value / what kubectl prints).

Every function is pure and raises ExpressionError (one sentence) on a malformed or failing expression.
"""

from __future__ import annotations

from pipelines.local.expressions.depends import depends_targets, evaluate_depends, expand_depends
from pipelines.local.expressions.errors import ExpressionError, UnresolvedVariable
from pipelines.local.expressions.govaluate.evaluator import evaluate_when
from pipelines.local.expressions.jsonpath import jsonpath, jsonpath_text
from pipelines.local.expressions.label_selectors import evaluate_condition
from pipelines.local.expressions.templating import evaluate_expr, expand_scope, render_value, substitute

__all__ = [
    "ExpressionError",
    "UnresolvedVariable",
    "depends_targets",
    "evaluate_condition",
    "evaluate_depends",
    "evaluate_expr",
    "evaluate_when",
    "expand_depends",
    "expand_scope",
    "jsonpath",
    "jsonpath_text",
    "render_value",
    "substitute",
]
