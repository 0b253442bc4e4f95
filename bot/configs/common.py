"""Pieces shared by the three format readers: finding unique keys, validating sizes, resolving a group
of axes (with MaxText's ``-1``), planning which values an edit must write, and building text splices.

Editing works on the original text, never on a re-dumped YAML tree: a *splice* replaces one value's
exact character span, or inserts one new line, so every other byte of the file stays as it was.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from bot.configs.mesh import Axis, resolve_wildcard
from bot.configs.sharding import ConfigKey, Group, Scalar
from bot.configs.yamlscan import Found, as_int, describe, scalar, walk
from bot.errors import ConfigError


# ---------------------------------------------------------------------------------------------- reading
def unique(root: Node, names: Collection[str], source: str, *, normalize: bool = False,
           owner: str | None = None, unrelated: Collection[str] = ()) -> dict[str, Found]:
    """Each of ``names`` found in the tree, which must occur at most once (else ConfigError with lines).

    With ``owner`` (a top-level section), a name stated once inside that section and otherwise only in the
    ``unrelated`` sections is the owner's: the same name means something else there (Megatron-Bridge's
    run_config.yaml also has a ``dataset.context_parallel_size`` and a ``tokenizer.tensor_model_parallel_size``,
    which pad samples and the vocabulary and do not place ranks). A repeat anywhere else is still refused.
    """
    found: dict[str, list[Found]] = {}
    for hit in walk(root, names, normalize=normalize):
        found.setdefault(hit.key, []).append(hit)
    for name, hits in found.items():
        owned = [h for h in hits if owner is not None and h.dotted.startswith(owner + ".")]
        others = [h for h in hits if h not in owned]
        if len(hits) > 1 and len(owned) == 1 and all(h.dotted.split(".", 1)[0] in unrelated for h in others):
            found[name] = owned
            continue
        if len(hits) > 1:
            where = ", ".join(f"line {h.line} ({h.dotted})" for h in hits)
            raise ConfigError(
                f"{name} appears {len(hits)} times ({where}); ASAP needs exactly one value to read and edit",
                source=source,
                field=name,
                hint="remove the duplicates, or point ASAP at the file of a single run",
            )
    return {name: hits[0] for name, hits in found.items()}


def size_value(hit: Found, source: str, *, allow_rest: bool, path: str | None = None) -> int:
    """The integer size a key holds; ConfigError naming key, value and line when it is not a valid size."""
    field = path or hit.dotted
    value = as_int(hit.value_node)
    expected = "a positive integer or -1 (the rest)" if allow_rest else "a positive integer"
    if value is None or value == 0 or value < (-1 if allow_rest else 1):
        shown = describe(scalar(hit.value_node)) if value is None else str(value)
        raise ConfigError(
            f"must be {expected}, got {shown} (line {hit.value_node.start_mark.line + 1})",
            source=source,
            field=field,
        )
    return value


def config_key(hit: Found, *, group: Group, axis: Axis, value: int, text: str, key: str | None = None,
               path: str | None = None) -> ConfigKey:
    """A :class:`ConfigKey` for a validated hit, with the value's exact span in ``text``."""
    node = hit.value_node
    start, end = node.start_mark.index, node.end_mark.index
    return ConfigKey(
        key=key or hit.key,
        path=path or hit.dotted,
        group=group,
        axis=axis,
        value=value,
        raw=text[start:end],
        line=hit.key_node.start_mark.line + 1,
        column=hit.key_node.start_mark.column + 1,
        start=start,
        end=end,
    )


def settings(root: Node, names: Collection[str], *, normalize: bool = False,
             lists: Collection[str] = ()) -> dict[str, Scalar]:
    """Scalar values of the extra settings in ``names`` wherever they sit, by dotted path; a setting in ``lists``
    written as a YAML list of scalars reads as its items joined by commas (``[layernorm, moe_act]`` ->
    ``"layernorm,moe_act"``)."""
    out: dict[str, Scalar] = {}
    for hit in walk(root, names, normalize=normalize):
        if isinstance(hit.value_node, SequenceNode) and hit.key in lists:
            items = [scalar(n) for n in hit.value_node.value if isinstance(n, ScalarNode)]
            out[hit.dotted] = ",".join(str(i) for i in items if i is not None)
            continue
        if isinstance(hit.value_node, ScalarNode):
            value = scalar(hit.value_node)
            if not isinstance(value, (str, int, float, bool)) and value is not None:
                value = str(value)  # dates, bytes: report as text
            out[hit.dotted] = value  # type: ignore[assignment]
    return out


# ------------------------------------------------------------------------------------------- resolving
@dataclass(frozen=True)
class Slot:
    """One key of a group, present in the file (``key``) or not (then ``default`` applies)."""

    name: str
    axis: Axis
    key: ConfigKey | None
    default: int = 1

    @property
    def value(self) -> int:
        return self.key.value if self.key is not None else self.default


def product_text(values: Mapping[str, int]) -> str:
    """``a=4 x b=8`` over the sizes other than 1 (or ``(all 1)``)."""
    parts = [f"{k}={v}" for k, v in values.items() if v != 1]
    return " x ".join(parts) if parts else "every axis = 1"


def resolve(
    slots: Sequence[Slot],
    total: int,
    *,
    group: str,
    source: str,
    mismatch: Callable[[str, int], str],
) -> dict[str, int]:
    """Resolve a group's single ``-1`` to "the rest" of ``total`` and check the product.

    ``mismatch(product_text, product)`` words the error when the sizes do not multiply to ``total``.
    Errors name the key; when a ``-1`` came from a default (the key is absent) the hint says so.
    """
    values = {s.name: s.value for s in slots}
    try:
        resolved = resolve_wildcard(values, total, source=source, group=group)
    except ConfigError as exc:
        defaulted = [s.name for s in slots if s.key is None and s.default == -1]
        if defaulted and exc.hint is None:
            exc = ConfigError(
                exc.message,
                source=exc.source,
                field=exc.field,
                hint=f"{', '.join(defaulted)} is not in the file, so its default -1 applies; "
                f"set it explicitly (e.g. to 1) if another axis should take the rest",
            )
        raise exc from None
    product = math.prod(resolved.values(), start=1)
    if product != total:
        raise ConfigError(mismatch(product_text(resolved), product), source=source, field=_first_changed(slots))
    return resolved


def _first_changed(slots: Sequence[Slot]) -> str | None:
    for s in slots:
        if s.key is not None and s.value != 1:
            return s.key.path
    return None


def try_resolve(slots: Sequence[Slot], total: int) -> dict[str, int] | None:
    """Like :func:`resolve` but ``None`` when the group does not resolve."""
    try:
        return resolve(slots, total, group="x", source="", mismatch=lambda _t, _p: "")
    except ConfigError:
        return None


def axis_sizes(slots: Sequence[Slot], resolved: Mapping[str, int]) -> dict[Axis, int]:
    """Canonical axis -> product of its keys' resolved sizes (axes of size 1 dropped)."""
    out: dict[Axis, int] = {}
    for s in slots:
        out[s.axis] = out.get(s.axis, 1) * resolved[s.name]
    return {a: v for a, v in out.items() if v != 1}


def plan_group(slots: Sequence[Slot], target: Mapping[Axis, int], total: int) -> dict[str, int]:
    """The slots an edit must write (name -> new size) so the group resolves to ``target``.

    Slots are ordered with each axis' primary key first. An axis whose resolved size already equals
    the target is left alone (a ``-1`` stays ``-1``). Otherwise the change goes to the axis' first key
    present in the file (else its primary key, to be added), keeping its companion keys (e.g.
    ``ici_fsdp_transpose_parallelism``) where the new size is divisible by them. A ``-1`` whose
    resolved value changes, or any ``-1`` of a group that did not resolve before, becomes an explicit
    number so the reviewer sees the new size on that line.
    """
    old = try_resolve(slots, total)
    new: dict[str, int] = {}
    axes: list[Axis] = []
    for s in slots:
        if s.axis not in axes:
            axes.append(s.axis)
    for axis in axes:
        members = [s for s in slots if s.axis == axis]
        want = target.get(axis, 1)
        if old is not None and math.prod((old[s.name] for s in members), start=1) == want:
            new.update({s.name: old[s.name] for s in members})
            continue
        chosen = next((s for s in members if s.key is not None), members[0])
        others = [s for s in members if s is not chosen]
        rest = math.prod((old[s.name] for s in others), start=1) if old is not None else None
        if rest is not None and want % rest == 0:
            new[chosen.name] = want // rest
            new.update({s.name: old[s.name] for s in others})  # type: ignore[index]
        else:
            new[chosen.name] = want
            new.update({s.name: 1 for s in others})
    writes: dict[str, int] = {}
    for s in slots:
        before = old[s.name] if old is not None else (None if s.value == -1 else s.value)
        if before != new[s.name]:
            writes[s.name] = new[s.name]
    return writes


# -------------------------------------------------------------------------------------------- splicing
@dataclass(frozen=True)
class Splice:
    """Replace ``text[start:end]`` with ``new`` (``start == end`` inserts)."""

    start: int
    end: int
    new: str
    file: str | None = None  # None: the config's own text; else a base_config file or a called script


def replace_value(text: str, key: ConfigKey, value: int) -> Splice:
    """Rewrite one value in place, keeping its quotes and any tag/anchor written before it.

    ``text`` is the text of the file holding the key (``key.file``). A value a launch script computes
    (``start < 0``) cannot be edited in place: ConfigError naming where it comes from.
    """
    if key.start < 0:
        raise ConfigError(
            f"{key.key} is set by {key.via or 'an expression'}, which ASAP cannot edit in place",
            field=key.key,
            hint=f"set {key.key} to {value} by hand",
        )
    raw = text[key.start:key.end]
    new = str(value)
    if raw and raw[-1] in "\"'" and len(raw) >= 2 and raw[0] == raw[-1]:
        quote = raw[-1]
        opening = raw.rfind(quote, 0, len(raw) - 1)  # an integer string holds no escaped quotes
        return Splice(key.start + opening + 1, key.end - 1, new, key.file)
    # plain scalar: its text is the last token (a tag or anchor may precede it)
    token = raw.split()[-1] if raw.split() else raw
    return Splice(key.end - len(token), key.end, new, key.file)


def line_ending(text: str, at: int | None = None) -> str:
    """The line ending used at ``at`` (or the file's first one): ``\\r\\n`` or ``\\n``."""
    nl = text.find("\n", at or 0) if at is not None else text.find("\n")
    if nl == -1:
        nl = text.find("\n")
    return "\r\n" if nl > 0 and text[nl - 1] == "\r" else "\n"


def insert_after_entry(
    text: str, key_node: Node, value_node: Node, flow: bool, entries: Sequence[tuple[str, int]]
) -> Splice:
    """Add ``entries`` (name, size) right after an existing mapping entry.

    In a flow mapping (``{a: 1}``) they follow it as ``, name: size``. In a block mapping each becomes
    one new line after the entry's line, indented like the entry, with the file's line ending.
    """
    if flow:
        pos = value_node.end_mark.index
        return Splice(pos, pos, "".join(f", {n}: {v}" for n, v in entries))
    key_start = key_node.start_mark.index
    line_start = text.rfind("\n", 0, key_start) + 1
    indent = text[line_start:key_start]
    if indent.strip():  # e.g. "- key: 1" in a list item: align under the key
        indent = " " * len(indent)
    nl = text.find("\n", value_node.end_mark.index)
    eol = line_ending(text, value_node.end_mark.index)
    body = eol.join(f"{indent}{n}: {v}" for n, v in entries)
    if nl == -1:
        return Splice(len(text), len(text), eol + body)
    return Splice(nl + 1, nl + 1, body + eol)


def insert_into_empty_flow(mapping: MappingNode, entries: Sequence[tuple[str, int]]) -> Splice:
    """Fill an empty flow mapping ``{}`` with ``entries``."""
    pos = mapping.end_mark.index - 1
    return Splice(pos, pos, ", ".join(f"{n}: {v}" for n, v in entries))


def apply_splices(text: str, splices: Sequence[Splice]) -> str:
    """Apply non-overlapping splices (inserts at one position keep their given order)."""
    ordered = sorted(enumerate(splices), key=lambda p: (p[1].start, p[1].end, p[0]))
    out: list[str] = []
    pos = 0
    for _, sp in ordered:
        if sp.start < pos:
            raise ConfigError("internal error: overlapping edits", field="edit")
        out.append(text[pos:sp.start])
        out.append(sp.new)
        pos = sp.end
    out.append(text[pos:])
    return "".join(out)


def command_words(command: str, source: str) -> list[str]:
    """A recorded launch command split as the shell would (comments dropped); ConfigError naming ``command``."""
    import shlex

    try:
        return shlex.split(command, comments=True)
    except ValueError as exc:
        raise ConfigError(f"the recorded launch command cannot be split into words: {exc}", source=source,
                          field="command", hint="check its quotes") from None


def args_after(command: str | None, source: str) -> list[str] | None:
    """The words after the config's own name in a recorded launch command (``bash train.sh 4 full 1`` -> the script's
    positional arguments; ``composer train.py mpt-7b.yaml k=v`` -> its overrides); None when it does not name it."""
    if not command:
        return None
    from pathlib import PurePath

    words = command_words(command, source)
    name = PurePath(source).name
    for i, w in enumerate(words):
        if PurePath(w).name == name:
            return words[i + 1:]
    return None


def last_entry(mapping: MappingNode) -> tuple[Node, Node] | None:
    """The last (key, value) pair of a mapping node, if any."""
    return mapping.value[-1] if mapping.value else None


def is_flow(mapping: Node) -> bool:
    return isinstance(mapping, MappingNode) and bool(mapping.flow_style)


# ------------------------------------------------------------------------------------------ scalar values
def positive_int(v: object) -> int | None:
    """A positive integer as configs write it (``8``, ``8.0``, ``"1_024"``), else None (booleans are not numbers)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v if v > 0 else None
    if isinstance(v, float) and v.is_integer() and v > 0:
        return int(v)
    if isinstance(v, str) and v.strip().replace("_", "").isdigit():
        return int(v.strip().replace("_", "")) or None
    return None


def as_bool(v: object) -> bool | None:
    """``true`` / ``false`` (YAML, a flag's text ``yes`` / ``no``), else None (not stated or not a boolean)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false", "yes", "no"):
        return v.strip().lower() in ("true", "yes")
    return None


def find_by_name(values: Mapping[str, object], *names: str) -> tuple[str | None, object]:
    """(dotted path, value) of the first of ``names`` present in ``values``, matched by key name (the last dotted
    part), so a key nested as NeMo and Megatron-Bridge nest it is found like a top-level one."""
    for name in names:
        for path, value in values.items():
            if path.rsplit(".", 1)[-1] == name:
                return path, value
    return None, None


# Where a config states the length of the sequences its data loader makes: Megatron-Bridge's ConfigContainer
# ``dataset.seq_length`` (``dataset.sequence_length`` before 2026), NeMo 2's ``data.seq_length``, NeMo 1's
# ``model.data.seq_length``.
DATA_SECTIONS: tuple[str, ...] = ("dataset", "data")
DATA_SEQ_NAMES: tuple[str, ...] = ("seq_length", "sequence_length")


def _in_data_section(path: str) -> bool:
    return bool(set(path.split(".")[:-1]) & set(DATA_SECTIONS))


def trained_seq_length(values: Mapping[str, object], *model_names: str) -> tuple[str | None, object, str | None]:
    """(path, value, note) of the sequence length a run trains on.

    The model's ``seq_length`` is the length its position embeddings are built for; the data loader's is the length
    of every sample, and what each step processes. Megatron-Bridge's run_config.yaml states both; its 2025 releases
    ran with them apart (a Llama 3.1 provider's 131,072 over 1,024-token samples), its 2026 releases refuse that.
    When the two differ the note names both; a data-side value that is not a number (NeMo's
    ``${model.encoder_seq_length}``) defers to the model's.
    """
    data = [(p, v) for p, v in values.items()
            if p.rsplit(".", 1)[-1] in DATA_SEQ_NAMES and _in_data_section(p) and positive_int(v)]
    model_path, model_value = find_by_name({p: v for p, v in values.items() if not _in_data_section(p)}, *model_names)
    if not data:
        return model_path, model_value, None
    path, value = data[0]
    note = None
    if model_path is not None and positive_int(model_value) and positive_int(model_value) != positive_int(value):
        note = (f"{model_path} {model_value} (the length the model's positions are built for) differs from {path} "
                f"{value}: each sample has the data loader's {value} tokens, and that is what is priced")
    return path, value, note
