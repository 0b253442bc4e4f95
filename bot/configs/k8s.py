"""Kubernetes manifests that launch training: the training container's command, read as its launch script.

GKE runs MaxText on TPU slices as a JobSet whose container runs ``bash -c "... python3 -m MaxText.train ..."``
(Google's tpu-recipes ship one beside each XPK launcher: ``training/ironwood/<model>/<recipe>/k8s/
k8s_manifest.yaml``); GPU clusters run Megatron or torchtitan as a Kubeflow PyTorchJob or MPIJob, or a plain Job,
with ``torchrun ...`` in ``command`` / ``args``. ASAP finds every ``containers:`` list in the manifest (any kind,
any nesting, every ``---`` document), reads each container's ``command`` + ``args`` as a shell command line (a
``bash -c SCRIPT`` as that script), with its literal ``env`` values set as the shell would see them, and takes the
first container that launches training. Every character keeps where the manifest writes it, so a value is read
and edited in place (``bot.configs.launch.embedded_script``); nothing is run.

The GKE node selector states the hardware: ``cloud.google.com/gke-tpu-accelerator`` names the chip and
``cloud.google.com/gke-tpu-topology`` (``4x4x4``; newer manifests: the pod annotation
``cloud.google.com/gke-tpu-slice-topology``) the chips of one slice, and the JobSet's ``replicas`` the slices. They become the config's stated device count (checked against the run's chips), its slices, and, for
MaxText on a chip JAX shows as two devices (TPU7x), the devices per chip its sizes count.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from bot.configs.launch import Files, embedded_script
from bot.configs.sharding import ShardingConfig
from bot.configs.yamlscan import compose_all
from bot.errors import ConfigError, UnknownChip

SHELLS = ("bash", "sh", "/bin/bash", "/bin/sh", "/usr/bin/bash", "/usr/bin/env")
GKE_ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
GKE_TOPOLOGY = ("cloud.google.com/gke-tpu-topology", "cloud.google.com/gke-tpu-slice-topology")  # selector, annotation
# GKE's accelerator labels (cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus) -> ASAP's catalog keys
ACCELERATORS = {"tpu7x": "tpu7x", "tpu-v6e-slice": "tpu-v6e", "tpu-v5p-slice": "tpu-v5p",
                "tpu-v5-lite-podslice": "tpu-v5e", "tpu-v5-lite-device": "tpu-v5e", "tpu-v4-podslice": "tpu-v4"}
_HEAD = re.compile(r"^(apiVersion|kind):", re.M)

Origin = list[tuple[str | None, int]]


def looks_like(text: str) -> bool:
    """A Kubernetes manifest: top-level ``apiVersion:`` and ``kind:`` lines."""
    return len({m.group(1) for m in _HEAD.finditer(text)}) == 2


def manifest_config(text: str, source: str, files: Files) -> ShardingConfig:
    """The config of the first container in ``text`` (a Kubernetes manifest) that launches training."""
    docs = [d for d in compose_all(text, source) if _is_manifest(d)]
    refused: list[str] = []
    for doc in docs:
        for container, replicas in _containers(doc, 1):
            inner, origin = _container_script(text, source, container)
            if not inner.strip():
                continue
            try:
                cfg = embedded_script(inner, origin, text, source, files, f"<{_name(container)} container>")
            except ConfigError as exc:
                if "no training launch" not in exc.message:
                    raise
                refused.append(_name(container))
                continue
            return _with_hardware(cfg, doc, replicas)
    kinds = ", ".join(sorted({_kind(d) for d in docs})) or "no Kubernetes object"
    seen = f" (containers: {', '.join(refused)})" if refused else " (it has no containers with a command)"
    raise ConfigError(f"no training launch found in the Kubernetes manifest ({kinds}){seen}", source=source,
                      hint="ASAP reads the command / args of the container that runs 'python3 -m MaxText.train ...' "
                      "or 'torchrun ... pretrain_gpt.py ...'")


# ------------------------------------------------------------------------------------------------ walking
def _is_manifest(node: Node) -> bool:
    return isinstance(node, MappingNode) and {"apiVersion", "kind"} <= {
        k.value for k, _ in node.value if isinstance(k, ScalarNode)}


def _get(node: Node, key: str) -> Node | None:
    if not isinstance(node, MappingNode):
        return None
    return next((v for k, v in node.value if isinstance(k, ScalarNode) and k.value == key), None)


def _kind(doc: Node) -> str:
    k = _get(doc, "kind")
    return str(k.value) if isinstance(k, ScalarNode) else "?"


def _name(container: Node) -> str:
    n = _get(container, "name")
    return str(n.value) if isinstance(n, ScalarNode) else "unnamed"


def _containers(node: Node, replicas: int, depth: int = 0) -> Iterator[tuple[MappingNode, int]]:
    """Every container mapping under ``node`` (``containers:`` lists, not init containers), with the replicas of
    the JobSet replicated job holding it (its slices)."""
    if depth > 40:
        return
    if isinstance(node, MappingNode):
        here = _get(node, "replicas")
        if _get(node, "template") is not None and isinstance(here, ScalarNode) and str(here.value).isdigit():
            replicas = int(here.value)  # a JobSet replicatedJob (or a Kubeflow replica spec): its copies
        for k, v in node.value:
            if isinstance(k, ScalarNode) and k.value == "containers" and isinstance(v, SequenceNode):
                yield from ((c, replicas) for c in v.value if isinstance(c, MappingNode))
            elif not (isinstance(k, ScalarNode) and k.value == "initContainers"):
                yield from _containers(v, replicas, depth + 1)
    elif isinstance(node, SequenceNode):
        for v in node.value:
            yield from _containers(v, replicas, depth + 1)


# ------------------------------------------------------------------------------------------ the command line
def _container_script(text: str, source: str, container: MappingNode) -> tuple[str, Origin]:
    """The container's ``env`` + ``command`` + ``args`` as shell text, each character's origin in ``text``.

    Kubernetes expands ``$(NAME)`` in ``command`` / ``args`` with the container's ``env`` before anything runs
    (``$$(NAME)`` stays literal), so those references take the env value, and its place in the manifest, here too.
    """
    env: dict[str, tuple[str, Origin]] = {}
    parts: list[tuple[str, Origin]] = []
    for name, value in _env(container):
        env[name] = (str(value.value), _origins(text, source, value))
        parts.append((f"export {name}=", [(None, -1)] * (len(name) + 8)))
        parts.append(_quoted(*env[name]))
        parts.append(("\n", [(None, -1)]))
    words = [_expand(str(w.value), _origins(text, source, w), env)
             for key in ("command", "args") for w in _scalars(_get(container, key))]
    flag = next((i for i, w in enumerate(words[1:3], 1) if re.fullmatch(r"-[a-z]*c", w[0])), None)
    if words and Path(words[0][0]).name in {Path(s).name for s in SHELLS} and flag is not None \
            and flag + 1 < len(words):
        parts.append(words[flag + 1])  # bash -c SCRIPT: SCRIPT is the script (later words are $0, $1, ...)
    else:
        for i, w in enumerate(words):
            if i:
                parts.append((" ", [(None, -1)]))
            parts.append(_quoted(*w))
    return "".join(p[0] for p in parts), [o for p in parts for o in p[1]]


def _expand(value: str, origin: Origin, env: dict[str, tuple[str, Origin]]) -> tuple[str, Origin]:
    """Kubernetes' ``$(NAME)`` expansion of one command / args string: a defined name takes the env value (with its
    origins), ``$$`` is a literal ``$``, anything else stays as written."""
    out, where, i = [], [], 0
    while i < len(value):
        m = re.match(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", value[i:])
        if value.startswith("$$", i):
            out.append("$")
            where.append(origin[i])
            i += 2
        elif m and m.group(1) in env:
            text, at = env[m.group(1)]
            out.append(text)
            where.extend(at)
            i += m.end()
        else:
            out.append(value[i])
            where.append(origin[i])
            i += 1
    return "".join(out), where


def _env(container: MappingNode) -> Iterator[tuple[str, ScalarNode]]:
    """The container's ``env`` entries with a literal ``value`` (``valueFrom`` is known only at run time)."""
    env = _get(container, "env")
    for item in env.value if isinstance(env, SequenceNode) else []:
        name, value = _get(item, "name"), _get(item, "value")
        if isinstance(name, ScalarNode) and isinstance(value, ScalarNode) and \
                re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(name.value)):
            yield str(name.value), value


def _scalars(node: Node | None) -> list[ScalarNode]:
    if isinstance(node, SequenceNode):
        return [v for v in node.value if isinstance(v, ScalarNode)]
    return [node] if isinstance(node, ScalarNode) else []


def _quoted(value: str, origin: Origin) -> tuple[str, Origin]:
    """One word, single-quoted for the shell (Kubernetes passes it as is, no shell expansion); a word holding a
    quote is read but not mapped back (read-only)."""
    if "'" in value:
        q = shlex.quote(value)
        return q, [(None, -1)] * len(q)
    return f"'{value}'", [(None, -1), *origin, (None, -1)]


def _origins(text: str, source: str, node: ScalarNode) -> Origin:
    """Where ``text`` writes each character of the scalar's value; (None, -1) for all when that cannot be told."""
    value = str(node.value)
    offsets = scalar_offsets(text, node)
    if offsets is None:
        return [(None, -1)] * len(value)
    return [(source, at) for at in offsets]


def scalar_offsets(text: str, node: ScalarNode) -> list[int] | None:
    """The offset in ``text`` of each character of a YAML scalar's value: plain, single-quoted, double-quoted
    without escapes, and literal blocks (``|``); None for folded blocks and escapes, which rewrite the text."""
    value, start, end = str(node.value), node.start_mark.index, node.end_mark.index
    raw = text[start:end]
    if node.style is None and raw == value:
        return list(range(start, end))
    if node.style in ("'", '"') and "\\" not in raw and "\n" not in raw:
        out, i = [], start + 1
        while i < end - 1:
            out.append(i)
            i += 2 if node.style == "'" and text[i] == "'" else 1  # '' stands for '
        return out if len(out) == len(value) else None
    if node.style == "|":
        return _literal_offsets(text, start, end, value)
    return None


def _literal_offsets(text: str, start: int, end: int, value: str) -> list[int] | None:
    """A literal block's content lines are the file's lines after the indicator, less their indentation."""
    first = text.find("\n", start, end)
    if first < 0:
        return None
    lines, at = [], first + 1
    while at < end:
        stop = text.find("\n", at, end)
        stop = end if stop < 0 else stop
        lines.append((at, stop))
        at = stop + 1
    body = [(a, b) for a, b in lines if text[a:b].strip()]
    if not body:
        return None
    a0, b0 = body[0]
    indent = len(text[a0:b0]) - len(text[a0:b0].lstrip(" "))
    out: list[int] = []
    rebuilt: list[str] = []
    for a, b in lines:
        b = b - 1 if b > a and text[b - 1] == "\r" else b
        line = text[a + indent:b] if b - a >= indent else ""
        rebuilt.append(line + "\n")
        out.extend(range(a + indent, a + indent + len(line)))
        out.append(b)
    joined = "".join(rebuilt)  # the block's text with every line's newline kept; the value is it, chomped
    return out[:len(value)] if joined.startswith(value) else None


# -------------------------------------------------------------------------------------------------- hardware
def _with_hardware(cfg: ShardingConfig, doc: Node, replicas: int) -> ShardingConfig:
    """The chips, slices and chip the GKE node selector states (a TPU JobSet); the config unchanged without one."""
    accel = _selector(doc, GKE_ACCELERATOR)
    topo = next((t for t in (_selector(doc, label) for label in GKE_TOPOLOGY) if t), None)
    dims = [int(x) for x in topo.split("x")] if topo and re.fullmatch(r"\d+(x\d+)*", topo) else None
    if not dims:
        return cfg
    per_slice = math.prod(dims)
    chip_key = ACCELERATORS.get(accel or "", accel or "")
    notes = [f"GKE node selector: {accel or 'accelerator not named'}, topology {topo} = {per_slice} chips per slice"
             f" x {replicas} slice{'s' if replicas != 1 else ''} (replicas) = {per_slice * replicas} chips"]
    update: dict[str, object] = {"devices": per_slice * replicas, "nodes": replicas,
                                 "reading": [*cfg.reading, *notes]}
    try:
        from knowledge.hardware import get_chip

        per_chip = get_chip(chip_key).jax_devices_per_chip
        if cfg.format == "maxtext" and per_chip != cfg.devices_per_chip:
            update["devices_per_chip"] = per_chip
    except UnknownChip:
        update["reading"] = [*cfg.reading, *notes, f"accelerator {accel!r} is not in ASAP's catalog: the chip comes "
                             "from run.yaml"]
    return cfg.model_copy(update=update)


def _selector(node: Node, label: str, depth: int = 0) -> str | None:
    """The first value for ``label`` in a ``nodeSelector`` or a pod template's ``annotations`` under ``node``."""
    if depth > 40:
        return None
    if isinstance(node, MappingNode):
        for holder in ("nodeSelector", "annotations"):
            sel = _get(node, holder)
            hit = _get(sel, label) if sel is not None else None
            if isinstance(hit, ScalarNode) and hit.value:
                return str(hit.value)
        children = [v for _, v in node.value]
    elif isinstance(node, SequenceNode):
        children = list(node.value)
    else:
        return None
    return next((f for f in (_selector(c, label, depth + 1) for c in children) if f is not None), None)
