"""Fuzzing: whatever bytes or JSON a reader is given, it returns a Profile or raises ProfileError."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.errors import ProfileError
from bot.profiles.hlo_text import parse_hlo_text
from bot.profiles.model import Profile
from bot.profiles.trace_events import parse_trace_bytes, read_trace_events
from bot.profiles.xprof_export import parse_hlo_stats, parse_op_profile, parse_overview_page, parse_roofline_model

DATA = Path(__file__).parent / "data" / "profiles"
PARSERS = [parse_hlo_stats, parse_roofline_model, parse_overview_page, parse_op_profile, parse_trace_bytes]
FAST = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)

scalars = st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats(allow_nan=True) | st.text(max_size=12)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=25,
)
KEYS = [
    "cols",
    "rows",
    "c",
    "v",
    "p",
    "id",
    "type",
    "traceEvents",
    "ph",
    "name",
    "dur",
    "args",
    "hlo_op",
    "hloStatsRecord",
    "byCategory",
    "children",
    "xla",
    "metrics",
    "rawTime",
    "stepnum",
    "stepTimeMs",
]
shaped = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=5),
    max_leaves=30,
)


def check(parse, data: bytes) -> None:
    try:
        result = parse(data, source="fuzz.json")
    except ProfileError as exc:
        assert exc.source == "fuzz.json" and str(exc)
        return
    assert isinstance(result, Profile)


@FAST
@given(st.binary(max_size=300))
def test_arbitrary_bytes(data):
    for parse in PARSERS:
        check(parse, data)


@FAST
@given(json_values | shaped)
def test_arbitrary_json(value):
    data = json.dumps(value, allow_nan=True).encode()
    for parse in PARSERS:
        check(parse, data)


def _mutate_table(table, rnd):
    """Replace one random node of a real export with a random value."""
    node, path = table, []
    while isinstance(node, (dict, list)) and node and rnd.draw(st.booleans()):
        key = rnd.draw(st.sampled_from(list(node.keys()) if isinstance(node, dict) else list(range(len(node)))))
        path.append(key)
        node = node[key]
    if not path:
        return rnd.draw(json_values)
    parent = table
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = rnd.draw(json_values)
    return table


@FAST
@given(st.data())
def test_mutated_real_exports(data):
    for tool, parse in (
        ("overview_page", parse_overview_page),
        ("roofline_model", parse_roofline_model),
        ("hlo_stats", parse_hlo_stats),
        ("op_profile", parse_op_profile),
    ):
        table = json.loads((DATA / f"cpu_{tool}.json").read_text())
        check(parse, json.dumps(_mutate_table(table, data)).encode())


@FAST
@given(st.data())
def test_mutated_real_trace(data):
    trace = json.loads(gzip.decompress((DATA / "cpu_step.trace.json.gz").read_bytes()))
    trace["traceEvents"] = trace["traceEvents"][:40]
    check(parse_trace_bytes, json.dumps(_mutate_table(trace, data)).encode())


@FAST
@given(st.binary(max_size=200))
def test_arbitrary_gzip_trace_files(tmp_path_factory, payload):
    path = tmp_path_factory.mktemp("fz") / "f.trace.json.gz"
    path.write_bytes(payload if payload[:1] == b"x" else gzip.compress(payload))
    try:
        assert isinstance(read_trace_events(path), Profile)
    except ProfileError:
        pass


HLO = (DATA / "collectives.hlo.txt").read_text()


@FAST
@given(st.text(max_size=400))
def test_arbitrary_hlo_text(text):
    try:
        assert isinstance(parse_hlo_text(text, source="f.hlo"), list)
    except ProfileError:
        pass


@FAST
@given(st.integers(0, len(HLO)), st.text(max_size=40))
def test_spliced_hlo_text(at, insert):
    try:
        assert isinstance(parse_hlo_text(HLO[:at] + insert + HLO[at:], source="f.hlo"), list)
    except ProfileError:
        pass
