"""Merge templates that differ only where a line holds a word-valued variable (a user, a host, a state).

Drain keeps two lines apart when too few of their constant tokens agree, which is right for `Failed password`
and `Failed none` — two events — and wrong for `Invalid user admin` and `Invalid user oracle`, one event whose
variable happens to be a word that no mask recognises. What tells the two apart is how many values a position
takes: an enumeration has a few, a variable many (the frequency argument of Brain and Logram). So templates of one
length that agree everywhere but one position are merged once that position shows `min_values` different tokens,
or a `<*>` already. The pass runs once, after mining, over the templates only: its cost grows with the templates,
never with the lines.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

__all__ = ["merge_templates"]

WILDCARD = "<*>"


def _find(parent: dict[int, int], node: int) -> int:
    while parent[node] != node:
        parent[node] = parent[parent[node]]
        node = parent[node]
    return node


def merge_templates(
    templates: Mapping[int, Sequence[str]], *, min_values: int, min_constants: int = 2
) -> dict[int, int]:
    """Which template each template joins: `{id: representative id}` (itself when it joins none).

    `templates` maps an id to its tokens (`<*>` for variables). Two templates join when they have the same length
    and differ at one position only, that position takes at least `min_values` tokens across all the templates that
    agree elsewhere (a `<*>` there counts as enough), and at least `min_constants` constant tokens remain beside
    it. Joining repeats until nothing changes, so a template may differ in several positions from its representative.
    """
    parent = {identity: identity for identity in templates}
    current = {identity: list(tokens) for identity, tokens in templates.items()}
    changed = True
    while changed:
        changed = False
        by_shape: dict[tuple[int, tuple[str, ...]], set[int]] = defaultdict(set)
        for identity, tokens in current.items():
            if _find(parent, identity) != identity:
                continue
            for position in range(len(tokens)):
                rest = tokens[:position] + tokens[position + 1 :]
                if sum(token != WILDCARD for token in rest) >= min_constants:
                    by_shape[(position, tuple(rest))].add(identity)
        for (position, _), members in by_shape.items():
            roots = {_find(parent, m) for m in members}
            if len(roots) < 2:
                continue
            values = {current[root][position] for root in roots}
            if WILDCARD not in values and len(values) < min_values:
                continue
            keep = min(roots)
            for root in roots - {keep}:
                parent[root] = keep
            current[keep][position] = WILDCARD
            changed = True
    return {identity: _find(parent, identity) for identity in templates}
