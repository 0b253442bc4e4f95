"""Reader for JAX/perfetto trace events: ``*.trace.json.gz`` and ``*.trace.json`` (Chrome trace format).

``jax.profiler.trace(dir)`` writes ``plugins/profile/<session>/<host>.trace.json.gz``:
``{"displayTimeUnit": "ns", "metadata": {...}, "traceEvents": [...]}`` with ``ts``/``dur`` in
microseconds. Device ops are complete events (``ph: "X"``) that carry ``args.hlo_op`` (the XLA runtime
puts it there, with ``hlo_module`` and ``device_ordinal``), or any event on an ``XLA Ops`` thread of a
``/device:`` process (TPU). They are aggregated by op name into :class:`OpStat` (per device). Steps come
from a device ``Steps`` thread or from events with ``args.step_num`` (``jax.profiler.StepTraceAnnotation``).

Large traces are decompressed and parsed in bounded chunks (events are split on ``{"ph":``, a byte
sequence that cannot occur inside a JSON string), so memory stays near the chunk size plus the per-op
aggregates, whatever the trace length.
"""

from __future__ import annotations

import gzip
import math
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from bot.errors import ProfileError
from bot.profiles.classify import op_kind
from bot.profiles.io import MAX_PROFILE_BYTES, check_gzip_ratio, check_size, human_bytes, is_gzip, json_value_end
from bot.profiles.model import OpStat, Profile

CHUNK_BYTES = 8 << 20  # decompressed bytes read, and at most parsed, at a time in streaming mode
WHOLE_FILE_BYTES = 8 << 20  # smaller traces are parsed in one go (any key order, any layout)
MAX_EVENT_BYTES = 16 << 20  # no event boundary in this much text: not a layout ASAP can stream
_EVENT_START = re.compile(rb'\{\s*"ph"\s*:')
_BOUNDARY = re.compile(rb',\s*\{\s*"ph"\s*:')  # "," then an event that starts with its "ph" key
_INDEX_SUFFIX = re.compile(r"(?:\.\d+)+$")


@dataclass
class _OpAgg:
    count: int = 0
    total_us: float = 0.0
    module: str | None = None


@dataclass
class _State:
    """Aggregates kept while events stream by; bounded by (ops x threads), not by event count."""

    pid_names: dict[Any, str] = field(default_factory=dict)
    tid_names: dict[tuple[Any, Any], str] = field(default_factory=dict)
    hlo_ops: dict[str, _OpAgg] = field(default_factory=dict)  # events carrying args.hlo_op
    line_ops: dict[tuple[Any, Any, str], _OpAgg] = field(default_factory=dict)  # other X events, per thread
    ordinals: set[str] = field(default_factory=set)
    hlo_pids: set[Any] = field(default_factory=set)
    step_num_events: dict[str, list[float]] = field(default_factory=dict)  # step_num -> durations
    numbered: dict[tuple[Any, Any], list[float]] = field(default_factory=dict)  # digit-named events per thread
    events: int = 0


def _consume(state: _State, events: Any, source: str) -> None:
    if not isinstance(events, list):
        raise ProfileError(
            f"expected a list of trace events, got {type(events).__name__}", source=source, field="traceEvents"
        )
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            continue  # Chrome trace viewers skip non-object entries (JAX writes a trailing {})
        state.events += 1
        ph = ev.get("ph")
        if ph == "M":
            args = ev.get("args")
            name = args.get("name") if isinstance(args, dict) else None
            if isinstance(name, str):
                if ev.get("name") == "process_name":
                    state.pid_names[_key(ev.get("pid"))] = name
                elif ev.get("name") == "thread_name":
                    state.tid_names[(_key(ev.get("pid")), _key(ev.get("tid")))] = name
            continue
        if ph != "X":
            continue
        name = ev.get("name")
        dur = ev.get("dur", 0)
        if not isinstance(name, str) or isinstance(dur, bool) or not isinstance(dur, (int, float)):
            raise ProfileError(
                "complete event ('ph': 'X') needs a text 'name' and a numeric 'dur'",
                source=source,
                field=f"traceEvents[{i}]",
            )
        if not math.isfinite(dur) or dur < 0:
            raise ProfileError(
                f"expected a non-negative duration, got {dur!r}", source=source, field=f"traceEvents[{i}].dur"
            )
        if name.startswith("end: "):
            continue  # XLA CPU runtime bookkeeping, not work
        args = ev.get("args")
        pid, tid = _key(ev.get("pid")), _key(ev.get("tid"))
        if isinstance(args, dict):
            hlo_op = args.get("hlo_op")
            if isinstance(hlo_op, str) and hlo_op:
                agg = state.hlo_ops.get(hlo_op)
                if agg is None:
                    module = args.get("hlo_module")
                    agg = state.hlo_ops[hlo_op] = _OpAgg(module=module if isinstance(module, str) else None)
                agg.count += 1
                agg.total_us += dur
                ordinal = args.get("device_ordinal")
                if ordinal is not None:
                    state.ordinals.add(str(ordinal))
                state.hlo_pids.add(pid)
                continue
            step = args.get("step_num")
            if step is not None and isinstance(step, (str, int)) and not isinstance(step, bool):
                state.step_num_events.setdefault(str(step), []).append(float(dur))
                continue
        if name.isdigit():
            state.numbered.setdefault((pid, tid), []).append(float(dur))
            continue
        key = (pid, tid, name)
        agg = state.line_ops.get(key)
        if agg is None:
            agg = state.line_ops[key] = _OpAgg()
        agg.count += 1
        agg.total_us += dur


def _key(value: Any) -> Any:
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else str(value)


def _open(path: Path, source: str) -> IO[bytes]:
    try:
        return gzip.open(path, "rb") if is_gzip(path) else path.open("rb")
    except OSError as exc:
        raise ProfileError(f"cannot read trace file: {exc.strerror or exc}", source=source) from None


def _chunks(fh: IO[bytes], source: str, limit: int) -> Iterator[bytes]:
    total = 0
    compressed = getattr(fh, "fileobj", None)  # GzipFile: the compressed file, to watch the expansion ratio
    try:
        while True:
            chunk = fh.read(CHUNK_BYTES)
            if not chunk:
                return
            total += len(chunk)
            if total > limit:
                raise ProfileError(
                    f"decompresses to more than {human_bytes(limit)}, the limit for one profile file", source=source
                )
            if compressed is not None:
                check_gzip_ratio(total, compressed.tell(), source=source)
            yield chunk
    except (gzip.BadGzipFile, zlib.error, EOFError) as exc:
        raise ProfileError(f"corrupt or truncated gzip data ({exc})", source=source) from None


def _parse(data: bytes, source: str, what: str = "JSON") -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ProfileError(
            f"malformed {what} at line {exc.lineno}, column {exc.colno} (char {exc.pos}): {exc.msg}", source=source
        ) from None


def _whole(data: bytes, state: _State, source: str) -> None:
    obj = _parse(data, source)
    if isinstance(obj, list):  # the Chrome "JSON array" form
        _consume(state, obj, source)
        return
    if not isinstance(obj, dict) or "traceEvents" not in obj:
        raise ProfileError("expected a Chrome trace: an object with 'traceEvents' or a list of events", source=source)
    _consume(state, obj["traceEvents"], source)




def _boundary(buf: bytes, within: int) -> int:
    """Offset just past the comma before the last event start (``{"ph":``, whitespace allowed) before ``within``.

    Cutting there leaves whole events before it, so a batch never holds more than ``within`` bytes of text;
    -1 when there is no such boundary.
    """
    hi, step = within, 1 << 16
    while hi > 0:
        lo = max(0, hi - step)
        last = None
        for last in _BOUNDARY.finditer(buf, lo, within):  # noqa: B007 - the last match is the one wanted
            pass
        if last is not None:
            return last.start() + 1
        hi, step = lo, step * 4
    return -1


def _stream(first: bytes, rest: Iterator[bytes], state: _State, source: str) -> None:
    """Parse a large trace chunk by chunk: whole events, at most ``CHUNK_BYTES`` of text at a time, go to orjson."""
    buf = first
    key = buf.find(b'"traceEvents"')
    while key < 0:
        more = next(rest, None)
        if more is None:
            raise ProfileError("expected a Chrome trace with a 'traceEvents' list", source=source)
        buf += more
        key = buf.find(b'"traceEvents"')
    found = _EVENT_START.search(buf, key)
    while found is None:
        if len(buf) > MAX_EVENT_BYTES:
            raise ProfileError(
                f"no trace event that starts with its \"ph\" key in the first {human_bytes(len(buf))}: large traces "
                "must list events as objects that start with \"ph\" (as jax.profiler writes them)", source=source)
        more = next(rest, None)
        if more is None:
            return  # no events at all
        buf += more
        found = _EVENT_START.search(buf, key)
    buf = buf[found.start():]
    offset = 0
    done = False
    while True:
        if not done and len(buf) <= CHUNK_BYTES:
            more = next(rest, None)
            if more is None:
                done = True
            else:
                buf += more
            continue
        # Whole events before the last boundary within the batch size; the end of the input ends the last batch.
        cut = _boundary(buf, min(len(buf), CHUNK_BYTES))
        if cut <= 0 and len(buf) > CHUNK_BYTES:
            cut = _boundary(buf, len(buf))  # one event larger than a batch
        if cut <= 0:
            if done:
                break
            if len(buf) > MAX_EVENT_BYTES:
                raise ProfileError(
                    f"no trace event boundary in {human_bytes(MAX_EVENT_BYTES)} near decompressed byte {offset}: "
                    'large traces must list events as objects that start with "ph" (as jax.profiler writes them)',
                    source=source,
                )
            more = next(rest, None)
            done = more is None
            buf += more or b""
            continue
        batch = _parse(b"[" + buf[:cut].rstrip().rstrip(b",") + b"]", source,
                       f"trace events (near decompressed byte {offset})")
        _consume(state, batch, source)
        del batch
        offset += cut
        buf = buf[cut:]
    _tail(buf, offset, state, source)


def _tail(buf: bytes, offset: int, state: _State, source: str) -> None:
    """The last event, then the end of the list (and whatever keys follow it)."""
    pos, batch = 0, []
    buf = buf.lstrip()
    while buf[pos:pos + 1] == b"{":  # the last event, and anything after it (JAX ends the list with {})
        end = json_value_end(buf, pos)
        if end < 0:
            raise ProfileError("trace ends in the middle of an event (truncated file?)", source=source)
        batch.append(buf[pos:end])
        pos = end
        while buf[pos:pos + 1] in (b",", b" ", b"\n", b"\r", b"\t"):
            pos += 1
    if not batch or buf[pos:pos + 1] != b"]":
        raise ProfileError(f"malformed trace events near decompressed byte {offset + pos}", source=source)
    _consume(state, _parse(b"[" + b",".join(batch) + b"]", source, "trace events"), source)


def read_trace_events(path: Path, *, source: str | None = None, limit: int = MAX_PROFILE_BYTES) -> Profile:
    """Aggregate a trace's device ops (per device) and steps into a Profile."""
    src = source or str(path)
    check_size(path, limit, source=src)
    state = _State()
    with _open(path, src) as fh:
        chunks = _chunks(fh, src, limit)
        first = b""
        for chunk in chunks:
            first += chunk
            if len(first) > WHOLE_FILE_BYTES:
                break
        else:
            if not first.strip():
                raise ProfileError("trace file is empty", source=src)
            _whole(first, state, src)
            return _to_profile(state, src)
        _stream(first, chunks, state, src)
    return _to_profile(state, src)


def parse_trace_bytes(data: bytes, *, source: str) -> Profile:
    """Aggregate trace JSON already in memory (used by tests and tools)."""
    state = _State()
    if not data.strip():
        raise ProfileError("trace file is empty", source=source)
    _whole(data, state, source)
    return _to_profile(state, source)


def _is_device(pid_name: str) -> bool:
    return pid_name.startswith("/device:")


def _to_profile(state: _State, source: str) -> Profile:
    profile = Profile(sources=[source])
    ops: dict[str, _OpAgg] = dict(state.hlo_ops)
    device_pids: set[Any] = set()
    if not ops:
        for (pid, tid, name), agg in state.line_ops.items():
            pname = state.pid_names.get(pid, "")
            tname = state.tid_names.get((pid, tid), "")
            if _is_device(pname) and tname.strip().lower() in ("xla ops", "ops"):
                device_pids.add(pid)
                have = ops.setdefault(name, _OpAgg())
                have.count += agg.count
                have.total_us += agg.total_us
    if state.ordinals:
        devices = len(state.ordinals)
    else:
        devices = len(device_pids) or 1
    profile.num_devices = devices if (state.ordinals or device_pids) else None
    kinds = {state.pid_names.get(p, "") for p in (state.hlo_pids | device_pids)}
    kinds.discard("")
    if kinds:
        kind = sorted(kinds)[0]
        if kind.startswith("/host:"):
            profile.device_kind = "cpu"
        elif kind.startswith("/device:"):
            profile.device_kind = kind.split(":")[1] if kind.count(":") >= 2 else kind
    for name, agg in sorted(ops.items(), key=lambda kv: -kv[1].total_us):
        category = _INDEX_SUFFIX.sub("", name)
        profile.ops.append(
            OpStat(
                name=name,
                category=category,
                kind=op_kind(None, name),
                occurrences=max(1, round(agg.count / devices)),
                total_time_us=agg.total_us / devices,
                program=agg.module,
            )
        )
    # Steps: a device "Steps" line first (one event per step per device), else StepTraceAnnotation events.
    step_lines = [
        durs
        for (pid, tid), durs in state.numbered.items()
        if state.tid_names.get((pid, tid), "").strip().lower() == "steps" and _is_device(state.pid_names.get(pid, ""))
    ]
    if step_lines:
        count = min(len(d) for d in step_lines)
        profile.step_times_us = [sum(d[i] for d in step_lines) / len(step_lines) for i in range(count)]
    elif state.step_num_events:
        ordered = sorted(state.step_num_events.items(), key=lambda kv: (len(kv[0]), kv[0]))
        profile.step_times_us = [max(durs) for _, durs in ordered]
    if profile.step_times_us:
        profile.num_steps = len(profile.step_times_us)
        profile.step_time_us = sum(profile.step_times_us) / profile.num_steps
    else:
        profile.warnings.append(
            f"{source}: no step markers (a 'Steps' thread or events with args.step_num); "
            "number of steps unknown — wrap the training step in jax.profiler.StepTraceAnnotation"
        )
    if not profile.ops:
        profile.warnings.append(f"{source}: no device op events (events with args.hlo_op, or an 'XLA Ops' thread)")
    return profile
