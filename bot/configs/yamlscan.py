"""Safe YAML reading that keeps source positions, for parsing and byte-exact editing of configs.

The config readers need more than ``yaml.safe_load`` gives: to edit a value without touching any other
byte they need the exact character span of every value, and to report problems they need line and
column. ``yaml.compose`` (with the safe loader, which never runs tags) yields nodes carrying
``start_mark.index``/``end_mark.index`` into the original text; this module wraps that, turns every
YAML failure into a :class:`ConfigError` with line/column, and finds keys wherever they sit in the tree.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import TypeVar

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from bot import yamlsafe
from bot.errors import ConfigError

T = TypeVar("T")

MAX_CONFIG_BYTES = 1024 * 1024
"""Configs larger than this are refused: real sharding configs are a few KiB; a megabyte is a mistake."""

_INT_TEXT = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Found:
    """One occurrence of a wanted key: where it sits (``path``), its key node and its value node."""

    path: tuple[str, ...]
    key: str
    key_node: ScalarNode
    value_node: Node
    parent: MappingNode

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    @property
    def line(self) -> int:
        """1-based line of the key."""
        return self.key_node.start_mark.line + 1


def check_size(text: str, source: str) -> None:
    """Refuse text larger than :data:`MAX_CONFIG_BYTES` with a message that says why."""
    if len(text) > MAX_CONFIG_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config is {len(text.encode('utf-8', 'surrogatepass')):,} bytes; sharding configs larger than "
            f"{MAX_CONFIG_BYTES:,} bytes (1 MiB) are refused",
            source=source,
            hint="point ASAP at the YAML file holding the parallelism settings, not a log or checkpoint",
        )


def _position(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    col = index - (text.rfind("\n", 0, index) + 1) + 1
    return line, col


def compose(text: str, source: str) -> Node | None:
    """Compose ``text`` into a node tree (no tags executed); YAML problems become ConfigError with line/column."""
    return _composed(text, source, yamlsafe.compose_node)


def compose_all(text: str, source: str) -> list[Node]:
    """Every document of a ``---``-separated stream (a Kubernetes manifest set), errors as :func:`compose`'s."""
    return _composed(text, source, yamlsafe.compose_nodes)


def _composed(text: str, source: str, composer: Callable[[str], T]) -> T:
    check_size(text, source)
    try:
        return composer(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = "; ".join(part for part in (exc.context, exc.problem) if part) or "malformed YAML"
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"malformed YAML{where}: {what}", source=source) from None
    except yaml.reader.ReaderError as exc:
        line, col = _position(text, exc.position)
        raise ConfigError(
            f"malformed YAML at line {line}, column {col}: unacceptable character #x{exc.character:04x}"
            if isinstance(exc.character, int)
            else f"malformed YAML at line {line}, column {col}: {exc.reason}",
            source=source,
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"malformed YAML: {exc}", source=source) from None
    except RecursionError:
        raise ConfigError("malformed YAML: nested too deeply to read", source=source) from None


def flag_name(key: str) -> str:
    """A key as Megatron/NeMo spell it, normalized: ``--tensor-model-parallel-size`` and
    ``trainer.strategy.tensor_model_parallel_size`` both end in ``tensor_model_parallel_size``."""
    return key.lstrip("-").replace("-", "_")


def walk(root: Node, names: Collection[str], *, normalize: bool = False) -> Iterator[Found]:
    """Every mapping entry in the tree whose (string) key is in ``names``, in document order.

    Aliased nodes are visited once (at their anchor), so an anchor reused by ``<<: *base`` is not
    reported twice. Keys that are not plain strings (numbers, complex keys) are skipped. With
    ``normalize``, keys are compared as :func:`flag_name` forms and a dotted key (NeMo 2's
    ``trainer.strategy.tensor_model_parallel_size``) matches by its last part; ``Found.key`` is then the
    normalized name and ``Found.path`` the normalized dotted path.
    """
    seen: set[int] = set()
    stack: list[tuple[Node, tuple[str, ...]]] = [(root, ())]
    out: list[Found] = []
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        children: list[tuple[Node, tuple[str, ...]]] = []
        if isinstance(node, MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, ScalarNode) and key_node.tag == "tag:yaml.org,2002:str":
                    name = key_node.value
                    if normalize:
                        parts = tuple(flag_name(x) for x in name.split("."))
                        name = parts[-1]
                        if name in names:
                            out.append(Found(path + parts, name, key_node, value_node, node))
                        children.append((value_node, path + parts))
                        continue
                    if name in names:
                        out.append(Found(path + (name,), name, key_node, value_node, node))
                    children.append((value_node, path + (name,)))
                else:
                    children.append((value_node, path + ("?",)))
        elif isinstance(node, SequenceNode):
            children = [(child, path + (f"[{i}]",)) for i, child in enumerate(node.value)]
        stack.extend(reversed(children))
    out.sort(key=lambda f: f.key_node.start_mark.index)
    return iter(out)


def scalar(node: Node) -> object:
    """The Python value of a scalar node, built by the safe constructor (no tags executed).

    Returns the node's raw text when the safe constructor cannot build it (unknown tag, ``!!int abc``).
    Non-scalars return the marker strings ``<mapping>`` / ``<sequence>``.
    """
    if isinstance(node, MappingNode):
        return "<mapping>"
    if isinstance(node, SequenceNode):
        return "<sequence>"
    try:
        return SafeConstructor().construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError):
        return node.value


def describe(value: object) -> str:
    """A short human form of a config value for error messages."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:37] + "...")
    return str(value)


def as_int(node: Node) -> int | None:
    """The integer a size value holds, or ``None`` if it is not one.

    Accepts YAML integers and quoted integer strings (``"4"``); refuses booleans, floats (even ``4.0``),
    nulls and any other text, so that ``true`` or ``2.5`` are not read as sizes.
    """
    if not isinstance(node, ScalarNode):
        return None
    value = scalar(node)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
        try:
            return int(value.strip())
        except ValueError:  # more digits than Python converts (int_max_str_digits)
            return None
    return None
