"""Profiler vocabulary -> normalized model: op categories to :class:`OpKind`, bound-by strings to :class:`BoundBy`.

XProf names categories after HLO opcodes (``all-reduce``, ``convolution fusion``, ``data formatting``,
``idle``); traces only give instruction names (``all-reduce.3``, ``copy_subtract_fusion``); GPU traces
add kernel names (``ncclDevKernel_AllReduce``, ``MemcpyD2H``). One table of patterns keeps every reader
classifying the same way.
"""

from __future__ import annotations

import functools
import re

from bot.profiles.model import BoundBy, OpKind

_COLLECTIVE = re.compile(
    r"^(?:all-reduce|all-gather|reduce-scatter|all-to-all|ragged-all-to-all|collective-permute|"
    r"collective-broadcast|send|recv|allreduce|allgather|reducescatter|alltoall)(?:$|[-_. ]|\b)"
)
_COLLECTIVE_ANY = re.compile(r"nccl|rccl|all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute")
_HOST = re.compile(
    r"^(?:infeed|outfeed|host|send-to-host|recv-from-host)|memcpyhtod|memcpydtoh|memcpy ?h2d|memcpy ?d2h|"
    r"host-to-device|device-to-host|host callback|python callback"
)
_MEMORY = re.compile(
    r"^(?:copy|copy-start|copy-done|transpose|data formatting|dynamic-update-slice|dynamic-slice|slice|"
    r"concatenate|pad|reshape|bitcast|broadcast|memcpy|memset|memcpyd2d|memcpydtod)(?:$|[-.\s]\d*$|\.\d+$)"
)
_IDLE = re.compile(r"^(?:idle|device idle)$")
_STRUCTURAL = re.compile(
    r"^(?:while|conditional|call|tuple|get-tuple-element|parameter|constant|after-all|"
    r"add-dependency|opt-barrier|optimization-barrier|partition-id|replica-id|program)$"
)
_INDEX_SUFFIX = re.compile(r"(?:\.\d+)+$")

# Categories whose time includes other ops that the profile lists on their own rows (xprof's
# MayHaveInnerOps): their self time is used and their FLOPs/bytes are not counted again.
CONTAINER_CATEGORIES = frozenset({"while", "conditional", "call", "megacore fusion"})


def _base(text: str) -> str:
    return _INDEX_SUFFIX.sub("", text.strip().lstrip("%").lower())


def _by_text(text: str) -> OpKind | None:
    base = _base(text)
    if not base:
        return None
    if _IDLE.match(base):
        return OpKind.IDLE
    if _COLLECTIVE.match(base) or _COLLECTIVE_ANY.search(base.replace("_", "-")):
        return OpKind.COLLECTIVE
    if _HOST.search(base):
        return OpKind.HOST
    if _MEMORY.match(base):
        return OpKind.MEMORY
    if _STRUCTURAL.match(base):
        return OpKind.OTHER
    return None


@functools.lru_cache(maxsize=4096)
def _by_category(category: str) -> OpKind | None:
    cat = category.strip().lower()
    kind = _by_text(cat)
    if kind is not None:
        return kind
    if cat and ("fusion" in cat or cat in _COMPUTE_CATEGORIES):
        return OpKind.COMPUTE
    return None


def category_kind(category: str | None) -> OpKind | None:
    """The kind a category alone decides (``None`` when the op's name must decide): cacheable per category."""
    return _by_category(category or "")


_COMPUTE_CATEGORIES = frozenset(
    {"convolution", "dot", "matmul", "gemm", "custom-call", "reduce", "non-fusion elementwise"}
)


def op_kind(category: str | None, name: str | None = None) -> OpKind:
    """What an op spends its time on, from its profiler category and, failing that, its name.

    A specific category wins (``convolution fusion`` is compute even when the op is named
    ``copy_fusion.2``); a generic or missing category falls back to the instruction name.
    """
    kind = _by_category(category or "")
    if kind is not None:
        return kind
    cat = (category or "").strip().lower()
    kind = _by_text(name or "")
    if kind is not None:
        return kind
    if cat in {"", "unknown", "other"} and not name:
        return OpKind.OTHER
    return OpKind.COMPUTE


_BOUND = {
    "compute": BoundBy.COMPUTE,
    "flops": BoundBy.COMPUTE,
    "mxu": BoundBy.COMPUTE,
    "hbm": BoundBy.HBM,
    "memory": BoundBy.HBM,
    "hbm bw": BoundBy.HBM,
    "memory bandwidth": BoundBy.HBM,
    # On-chip memories (TPU CMEM/VMEM, GPU shared memory/L1): memory-bandwidth bound; the model has one
    # memory ceiling, so they count as HBM-class bound.
    "cmem read": BoundBy.HBM,
    "cmem write": BoundBy.HBM,
    "vmem read": BoundBy.HBM,
    "vmem write": BoundBy.HBM,
    "shm/l1": BoundBy.HBM,
    "sram": BoundBy.HBM,
    "ici": BoundBy.ICI,
    "nvlink": BoundBy.ICI,
    "interconnect": BoundBy.ICI,
    "dcn": BoundBy.DCN,
    "network": BoundBy.DCN,
    "host": BoundBy.HOST,
    "infeed": BoundBy.HOST,
    "outfeed": BoundBy.HOST,
    "input": BoundBy.HOST,
    "unknown": BoundBy.UNKNOWN,
}


def bound_by(value: object) -> BoundBy | None:
    """Map a profile's bound-by text (``Compute``, ``HBM``, ``VMEM Read``, ``ICI``...) to :class:`BoundBy`.

    Empty or missing means "not reported" (``None``); unrecognised text is ``UNKNOWN``.
    """
    if not isinstance(value, str):
        return None
    return _bound_text(value)


@functools.lru_cache(maxsize=256)
def _bound_text(value: str) -> BoundBy | None:
    text = value.strip().lower()
    if not text:
        return None
    return _BOUND.get(text, BoundBy.UNKNOWN)
