"""YAML as Kubernetes and Argo read it, for every manifest, workflow and config a person hands us.

The API server, kubectl and Argo turn YAML into JSON with go-yaml (sigs.k8s.io/yaml). Where PyYAML's safe loader
differs from that, this loader does what they do:

- a key given twice in one mapping is an error (`mapping key "x" already defined`), not a silent overwrite;
- an unquoted date (`2024-01-01`) stays the string it is in JSON, not a `datetime.date`;
- aliases that expand a document far beyond what was written are refused (go-yaml: "document contains excessive
  aliasing"): the "billion laughs" — nine anchors of nine aliases each, a few hundred bytes that stand for 9^9
  values — would otherwise take every walk over the document (validation, substitution, JSON) minutes and
  gigabytes; and an alias inside its own anchor (a cycle, which JSON cannot hold) is refused too.

Every refusal is a `yaml.YAMLError`, so each reader words it as it words any broken YAML.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["MAX_ALIAS_VALUES", "Loader", "load", "load_all"]

# How many values aliases may add to a document, beyond those written out. Anchors that a workflow reuses (a
# template's defaults merged into a few dozen steps) add hundreds; a YAML bomb adds millions at once.
MAX_ALIAS_VALUES = 100_000


class Loader(yaml.SafeLoader):
    """PyYAML's safe loader reading as go-yaml does (the module's docstring): duplicates, dates, aliases."""

    def construct_document(self, node: yaml.Node) -> Any:
        """The document of `node`, once its aliases are known to stay within bounds."""
        _check_aliases(node)
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """A mapping; a ConstructorError naming a key given twice (a merged `<<: *defaults` key may be overridden)."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str | int | float | bool):
                continue
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


Loader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_aliases(root: yaml.Node) -> None:
    """Refuse a document whose aliases add more than MAX_ALIAS_VALUES values, or that holds itself.

    The composer gives an alias the very node of its anchor, so the document is a graph; the values it stands for
    are counted once per node (memoised, depth-first without recursion), in time of the nodes written.
    """
    values: dict[int, int] = {}  # node id -> values it stands for, aliases expanded
    open_: set[int] = set()  # nodes whose children are being counted: meeting one again is a cycle
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, counted_children = stack.pop()
        key = id(node)
        if counted_children:
            values[key] = 1 + sum(values[id(child)] for child in _children(node))
            open_.discard(key)
            continue
        if key in values:
            continue
        if key in open_:
            raise yaml.composer.ComposerError(None, None, "an alias refers to its own anchor", node.start_mark)
        open_.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in values)
    written = len(values)  # every node written out, counted once
    if values[id(root)] - written > MAX_ALIAS_VALUES:
        raise yaml.composer.ComposerError(
            None,
            None,
            f"its aliases expand it to {values[id(root)]:,} values from {written:,} written (more than "
            f"{MAX_ALIAS_VALUES:,} added); Kubernetes refuses such a document (excessive aliasing): write the "
            "values out",
            root.start_mark,
        )


def load_all(text: str) -> list[Any]:
    """Every document of `text`, empty ones dropped; yaml.YAMLError (or RecursionError, too deep) when unreadable."""
    return [document for document in yaml.load_all(text, Loader=Loader) if document is not None]


def load(text: str) -> Any:
    """The single document of `text` (None when empty); as `load_all` otherwise."""
    return yaml.load(text, Loader=Loader)
