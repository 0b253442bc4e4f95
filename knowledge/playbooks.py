"""Prose playbooks (``playbooks/*.md``) split into citable sections, and the moves they carry.

The playbooks are ASAP's written guide to sharding. They are also the single source of the moves the
proposal engine applies: each move is a fenced block ```` ```yaml asap-move ```` placed under the heading
whose text explains it, with the fields of a ``bot.proposals.moves.Rule`` (``id``, ``priority``, ``when``,
``move`` | ``settings`` | ``advice``, ``rationale``, ``tradeoffs``, ``source``). Because the rule and its
explanation sit in the same file, they cannot drift apart, and every move can cite ``file#anchor``.
``README.md`` documents the format (with example blocks) and is not a playbook: it is never read here.

Section metadata comes from an HTML comment right under a heading, inherited by sub-headings::

    <!-- asap: bottleneck=communication chip_family=tpu -->

``axis=<mesh axis>`` marks the section that explains one mesh axis (a proposal that grows it cites it);
``slices=multi`` a section that only concerns runs over several slices/nodes (DCN).

Public API::

    load_playbooks(directory) -> list[PlaybookSection]
    load_moves_from_playbooks(directory) -> list[dict]   # raw rule dicts + "citation"
    moves_document(directory) -> dict                   # {"schema_version": 1, "rules": [...]}, the Playbook shape
    move_citations(directory) -> dict[str, MoveCitation]
    slugify(heading) -> str                             # GitHub-style heading anchor
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bot import yamlsafe
from bot.errors import AsapError
from bot.resources import playbooks_dir
from knowledge.cost_fp8_recipe import RECIPES

PLAYBOOKS_DIR = playbooks_dir()
"""The playbooks in use: ``ASAP_PLAYBOOKS_DIR`` or the bundled ones (see :mod:`bot.resources`)."""
MAX_PLAYBOOK_BYTES = 1 << 20
MOVE_INFO_WORD = "asap-move"
NOT_PLAYBOOKS = frozenset({"readme.md"})
"""Files in the folder that document the format rather than being playbooks (their examples are no moves)."""
META_KEYS: dict[str, tuple[str, ...]] = {
    "bottleneck": ("compute", "hbm", "communication", "host", "any"),
    "chip_family": ("tpu", "gpu", "cpu", "any"),
    "axis": ("data", "fsdp", "tensor", "sequence", "expert", "pipeline"),
    "slices": ("multi", "single", "any"),
    "fp8_recipe": (*RECIPES, "any"),  # the recipes the cost model knows (knowledge.cost_fp8_recipe)
}

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^(`{3,}|~{3,})\s*(.*)$")
_META = re.compile(r"^\s*<!--\s*asap:(.*?)-->\s*$")


@dataclass(frozen=True)
class MoveCitation:
    """Where a move is written: the playbook file (relative to the repo) and the heading that explains it."""

    file: str
    anchor: str
    heading: str
    line: int

    @property
    def ref(self) -> str:
        """``playbooks/bottlenecks.md#tensor-parallelism-is-too-wide`` — what a proposal cites."""
        return f"{self.file}#{self.anchor}"


@dataclass(frozen=True)
class PlaybookSection:
    """One heading of a playbook and the text under it (up to the next heading of any level)."""

    file: str  # relative path, e.g. playbooks/bottlenecks.md
    heading_path: tuple[str, ...]  # ancestors then this heading
    anchor: str  # GitHub-style anchor of this heading, unique within the file
    level: int
    line: int  # 1-based line of the heading
    text: str  # prose; move blocks rendered as readable sentences
    metadata: dict[str, str] = field(default_factory=dict)  # bottleneck, chip_family ("any" when general)
    move_ids: tuple[str, ...] = ()

    @property
    def heading(self) -> str:
        return self.heading_path[-1]

    @property
    def ref(self) -> str:
        """``file#anchor``: the citation a person can open."""
        return f"{self.file}#{self.anchor}"


@dataclass
class _Parsed:
    sections: list[PlaybookSection]
    moves: list[dict[str, Any]]


def slugify(heading: str) -> str:
    """GitHub's heading anchor: lowercase, drop punctuation except ``-`` and ``_``, spaces become ``-``."""
    text = unicodedata.normalize("NFKC", heading).strip().lower()
    text = re.sub(r"[`*_]{1,2}(?=\S)|(?<=\S)[`*_]{1,2}", lambda m: "_" if m.group(0) == "_" else "", text)
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def _relative(path: Path) -> str:
    root = PLAYBOOKS_DIR.parent
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return f"{path.parent.name}/{path.name}"


def _parse_meta(body: str, source: str, line: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in body.split():
        key, sep, value = item.partition("=")
        if not sep or key not in META_KEYS:
            raise AsapError(
                f"playbook metadata {item!r} not understood at line {line}",
                source=source,
                field="asap comment",
                hint=f"write key=value with key one of {', '.join(META_KEYS)}",
            )
        if value not in META_KEYS[key]:
            raise AsapError(
                f"{key}={value!r} at line {line}; expected one of {', '.join(META_KEYS[key])}",
                source=source,
                field=key,
            )
        out[key] = value
    return out


def _move_text(rule: dict[str, Any]) -> str:
    """A move block as sentences, so the search index sees words rather than YAML."""
    what = rule.get("advice")
    if what is None:
        mv = rule.get("move") or {}
        parts = []
        for kind, spec in mv.items():
            specs = spec if isinstance(spec, list) else [spec]
            for s in specs:
                if isinstance(s, dict):
                    parts.append(f"{kind} " + " ".join(f"{k} {v}" for k, v in s.items()))
        what = "; ".join(parts)
    when = rule.get("when") or {}
    cond = ", ".join(str(c) for c in (when.get("mesh") or []))
    return (
        f"Move {rule.get('id')} (when {', '.join(when.get('bottleneck') or [])}-bound"
        f"{'; ' + cond if cond else ''}): {what}. {rule.get('rationale', '')} "
        f"Trade-offs: {rule.get('tradeoffs', '')} Source: {rule.get('source', '')}"
    )


def _parse_file(path: Path) -> _Parsed:
    source = _relative(path)
    try:
        if path.stat().st_size > MAX_PLAYBOOK_BYTES:
            raise AsapError("playbook is larger than 1 MiB", source=source)
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise AsapError("playbook is not UTF-8 text", source=source) from None
    except OSError as exc:
        raise AsapError(f"cannot read playbook: {exc.strerror or exc}", source=source) from None

    sections: list[PlaybookSection] = []
    moves: list[dict[str, Any]] = []
    stack: list[tuple[int, str, dict[str, str]]] = []  # (level, title, own metadata)
    used: dict[str, int] = {}
    cur: dict[str, Any] | None = None  # the open section being filled
    fence: tuple[str, bool, int, list[str]] | None = None  # (marker, is_move, start line, body)

    def close() -> None:
        if cur is None:
            return
        sections.append(
            PlaybookSection(
                file=source,
                heading_path=tuple(cur["path"]),
                anchor=cur["anchor"],
                level=cur["level"],
                line=cur["line"],
                text="\n".join(cur["text"]).strip(),
                metadata=dict(cur["meta"]),
                move_ids=tuple(cur["moves"]),
            )
        )

    for no, line in enumerate(lines, start=1):
        if fence is not None:
            marker, is_move, start, body = fence
            if line.strip().startswith(marker) and set(line.strip()) <= set(marker[0]):
                fence = None
                if not is_move:
                    if cur is not None:
                        cur["text"].extend(body)
                    continue
                if cur is None:
                    raise AsapError(f"move block at line {start} is not under any heading", source=source)
                try:
                    rule = yamlsafe.load("\n".join(body))
                except yaml.YAMLError as exc:
                    mark = getattr(exc, "problem_mark", None)
                    at = start + 1 + mark.line if mark else start
                    raise AsapError(
                        f"malformed YAML in move block at line {at}: {getattr(exc, 'problem', exc)}", source=source
                    ) from None
                if not isinstance(rule, dict) or not isinstance(rule.get("id"), str):
                    raise AsapError(
                        f"move block at line {start} must be a YAML mapping with an 'id'", source=source, field="id"
                    )
                if "citation" in rule:
                    raise AsapError(
                        f"move {rule['id']} at line {start}: 'citation' is derived from the heading, do not write it",
                        source=source,
                        field="citation",
                    )
                rule["citation"] = MoveCitation(file=source, anchor=cur["anchor"], heading=cur["path"][-1], line=start)
                moves.append(rule)
                cur["moves"].append(rule["id"])
                cur["text"].append(_move_text(rule))
            else:
                body.append(line)
            continue
        fm = _FENCE.match(line.strip())
        if fm:
            info = fm.group(2).split()
            fence = (fm.group(1), MOVE_INFO_WORD in info, no, [])
            continue
        hm = _HEADING.match(line)
        if hm:
            close()
            level, title = len(hm.group(1)), hm.group(2).strip()
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title, {}))
            base = slugify(title)
            n = used.get(base, 0)
            used[base] = n + 1
            meta: dict[str, str] = {}
            for _, _, own in stack:
                meta.update(own)
            cur = {
                "path": [t for _, t, _ in stack],
                "anchor": base if n == 0 else f"{base}-{n}",
                "level": level,
                "line": no,
                "text": [],
                "meta": meta,
                "moves": [],
            }
            continue
        mm = _META.match(line)
        if mm:
            own = _parse_meta(mm.group(1), source, no)
            if cur is None:
                raise AsapError(f"asap metadata comment at line {no} is not under any heading", source=source)
            stack[-1][2].update(own)
            cur["meta"].update(own)
            continue
        if cur is not None:
            cur["text"].append(line)
    if fence is not None:
        raise AsapError(f"code block opened at line {fence[2]} is never closed", source=source)
    close()
    return _Parsed(sections=sections, moves=moves)


def _files(directory: Path) -> list[Path]:
    directory = Path(directory)
    if not directory.is_dir():
        raise AsapError("playbooks folder not found", source=str(directory))
    return sorted(p for p in directory.glob("*.md") if p.is_file() and p.name.lower() not in NOT_PLAYBOOKS)


def _parse_all(directory: Path) -> _Parsed:
    sections: list[PlaybookSection] = []
    moves: list[dict[str, Any]] = []
    seen: dict[str, MoveCitation] = {}
    for path in _files(directory):
        parsed = _parse_file(path)
        sections.extend(parsed.sections)
        for rule in parsed.moves:
            cit = rule["citation"]
            if rule["id"] in seen:
                first = seen[rule["id"]]
                raise AsapError(
                    f"duplicate move id {rule['id']!r} (also at {first.file} line {first.line})",
                    source=f"{cit.file} line {cit.line}",
                    field="id",
                )
            seen[rule["id"]] = cit
            moves.append(rule)
    return _Parsed(sections=sections, moves=moves)


def load_playbooks(directory: Path = PLAYBOOKS_DIR) -> list[PlaybookSection]:
    """Every heading of every ``*.md`` in ``directory`` as a section, in file then document order."""
    return _parse_all(Path(directory)).sections


def load_moves_from_playbooks(directory: Path = PLAYBOOKS_DIR) -> list[dict[str, Any]]:
    """The move blocks as written (raw dicts), each with ``"citation"``: a :class:`MoveCitation`.

    Field validation is the proposal engine's (``bot.proposals.moves.Rule``); this reader checks only what
    it owns: YAML syntax, a mapping with an ``id``, unique ids, and a block under a heading.
    """
    return _parse_all(Path(directory)).moves


def moves_document(directory: Path = PLAYBOOKS_DIR) -> dict[str, Any]:
    """The moves as ``{"schema_version": 1, "rules": [...]}`` (no citation keys), ready for ``Playbook.model_validate``."""
    rules = [{k: v for k, v in m.items() if k != "citation"} for m in load_moves_from_playbooks(directory)]
    return {"schema_version": 1, "rules": rules}


def move_citations(directory: Path = PLAYBOOKS_DIR) -> dict[str, MoveCitation]:
    """Move id -> where it is written and explained."""
    return {m["id"]: m["citation"] for m in load_moves_from_playbooks(directory)}
