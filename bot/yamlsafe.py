"""The one way ASAP reads YAML: the safe loader (no tags executed) with bounded alias expansion.

YAML aliases (``*name``) let a 1.6 KB file stand for billions of values (the "billion laughs" bomb): the
parser builds shared objects cheaply, but anything that walks the result (validation, formatting an error)
expands them and runs out of time and memory. Every YAML file ASAP reads (run.yaml, sharding configs,
``.asap.yml``, playbook move blocks, eval cases, the hardware catalog, failure records, model settings) goes
through :func:`load` or :func:`compose_node`, which count alias references and the number of values the
document would expand to, and refuse it past :data:`MAX_ALIASES` / :data:`MAX_EXPANDED_NODES` with
:class:`YamlBombError` (a ``yaml.YAMLError``, so callers' existing YAML error handling reports it with the
file name). Recursive anchors (``&a [*a]``) are refused too.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, SequenceNode

MAX_ALIASES = 100
"""Alias references (``*name``, including ``<<: *base`` merges) allowed in one document."""
MAX_EXPANDED_NODES = 100_000
"""Values (scalars, lists, mappings) one document may stand for once its aliases are expanded."""


class YamlBombError(yaml.YAMLError):
    """A document whose aliases expand past the limits (or refer to themselves)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.problem = message  # the attribute readers of MarkedYAMLError show

    def __str__(self) -> str:
        return self.problem


class BoundedSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses alias bombs before anything is constructed."""

    def __init__(self, stream: Any, *, allow_cycles: bool = False) -> None:
        super().__init__(stream)
        self._alias_count = 0
        self.allow_cycles = allow_cycles

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            self._alias_count += 1
            if self._alias_count > MAX_ALIASES:
                raise YamlBombError(
                    f"more than {MAX_ALIASES} YAML aliases (*name) in one document; ASAP refuses alias "
                    "expansion beyond that (write the values out, or use fewer anchors)"
                )
        return super().compose_node(parent, index)

    def compose_document(self) -> Node | None:
        node = super().compose_document()
        self._alias_count = 0
        if node is not None:
            check_expansion(node, allow_cycles=self.allow_cycles)
        return node


def check_expansion(root: Node, *, allow_cycles: bool = False) -> int:
    """The number of values ``root`` stands for with aliases expanded; raises past the limit or on a cycle.

    ``allow_cycles``: a node tree that is walked visiting each node once (the config readers) may keep a
    recursive anchor; the edge back is not counted. Built values never may (validation would loop).
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            if allow_cycles:
                return 0
            raise YamlBombError("a YAML anchor refers to itself (recursive alias); ASAP refuses recursive documents")
        open_nodes.add(key)
        total = 1
        if isinstance(node, MappingNode):
            for k, v in node.value:
                total += size(k) + size(v)
                if total > MAX_EXPANDED_NODES:
                    break
        elif isinstance(node, SequenceNode):
            for child in node.value:
                total += size(child)
                if total > MAX_EXPANDED_NODES:
                    break
        open_nodes.discard(key)
        if total > MAX_EXPANDED_NODES:
            raise YamlBombError(
                f"YAML aliases (*name) expand this document to more than {MAX_EXPANDED_NODES:,} values; "
                "ASAP refuses alias expansion beyond that (an alias bomb?)"
            )
        sizes[key] = total
        return total

    try:
        return size(root)
    except RecursionError:
        raise YamlBombError("YAML nested too deeply to read") from None


def load(text: str | bytes) -> Any:
    """``yaml.safe_load`` with bounded aliases: the Python value of the first document."""
    loader = BoundedSafeLoader(text)
    try:
        return loader.get_single_data()
    except RecursionError:
        raise YamlBombError("YAML nested too deeply to read") from None
    finally:
        loader.dispose()


def compose_node(text: str | bytes) -> Node | None:
    """``yaml.compose`` with bounded aliases: the node tree (with marks) of the single document.

    Recursive anchors are allowed here (readers of node trees visit each node once); their size is bounded.
    """
    loader = BoundedSafeLoader(text, allow_cycles=True)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


MAX_DOCUMENTS = 64
"""Documents one multi-document stream (``---``) may hold: a Kubernetes manifest set, not a log."""


def compose_nodes(text: str | bytes) -> list[Node]:
    """The node trees (with marks) of every document of ``text`` (``---``-separated), each bounded like
    :func:`compose_node`; more than :data:`MAX_DOCUMENTS` documents is a :class:`YamlBombError`."""
    loader = BoundedSafeLoader(text, allow_cycles=True)
    out: list[Node] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                out.append(node)
            if len(out) > MAX_DOCUMENTS:
                raise YamlBombError(f"more than {MAX_DOCUMENTS} YAML documents in one file; ASAP reads at most that many")
        return out
    finally:
        loader.dispose()
