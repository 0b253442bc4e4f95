"""Collectives in compiled HLO text: real JAX output, every replica-group form, async pairs, traps."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import ProfileError
from bot.profiles.hlo_text import parse_hlo_text, read_hlo_text

DATA = Path(__file__).parent / "data" / "profiles"


def test_real_jit_step_mesh_form_groups():
    ops = {c.name: c for c in read_hlo_text(DATA / "step.hlo.txt")}
    assert set(ops) == {"all-reduce", "all-reduce.3"}
    # (f32[], f32[128,128]) tuple: 4 + 128*128*4 bytes; mesh['axis_0'=2,'axis_1'=2] {'axis_0'} -> 2 groups of 2
    assert ops["all-reduce.3"].result_bytes == 4 + 128 * 128 * 4
    assert (ops["all-reduce.3"].group_size, ops["all-reduce.3"].num_groups) == (2, 2)
    assert ops["all-reduce"].dtype == "f32" and ops["all-reduce"].computation == "main.0_spmd"


def test_real_shard_map_every_collective_kind():
    ops = {c.op: c for c in read_hlo_text(DATA / "collectives.hlo.txt")}
    assert set(ops) == {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"}
    assert ops["all-gather"].result_bytes == 64 * 64 * 4 and ops["all-gather"].group_size == 2
    assert ops["all-to-all"].result_bytes == 2 * 16 * 64 * 4  # tuple of two f32[1,16,64]
    assert (ops["collective-permute"].group_size, ops["collective-permute"].num_groups) == (2, 4)


SYNTHETIC = """HloModule jit_train, num_partitions=8

%add (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %add.1 = bf16[] add(%a, %b)
}

%wrapped_reduce_scatter (p: bf16[64,1024]) -> bf16[8,1024] {
  %p = bf16[64,1024]{1,0} parameter(0)
  ROOT %reduce-scatter.4 = bf16[8,1024]{1,0} reduce-scatter(%p), channel_id=9, replica_groups=[1,8]<=[8], dimensions={0}, to_apply=%add
}

ENTRY %main (x: bf16[8,1024]) -> bf16[64,1024] {
  %x = bf16[8,1024]{1,0} parameter(0)
  %all-gather-start = (bf16[8,1024]{1,0}, bf16[64,1024]{1,0}) all-gather-start(%x), channel_id=1, replica_groups=[2,4]<=[4,2]T(1,0), dimensions={0}, use_global_device_ids=true
  %all-gather-done = bf16[64,1024]{1,0} all-gather-done(%all-gather-start)
  %all-reduce-start.2 = f32[1024]{0} all-reduce-start(%y), channel_id=2, replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=%add
  %all-reduce-done.2 = f32[1024]{0} all-reduce-done(%all-reduce-start.2)
  %cp-start = (s8[16]{0}, s8[16]{0}, u32[], u32[]) collective-permute-start(%z), source_target_pairs={{0,1},{1,2},{2,3}}
  %all-reduce.9 = s4[1001]{0} all-reduce(%q), replica_groups={}, to_apply=%add
  %ag.5 = f32[1024,256]{0,1} all-gather(%w), channel_id=4, replica_groups=mesh['a'=1,'b'=2,'c'=4], device_ids=([2,2,2]T(1,0,2)) {'c'}, dimensions={1}
  %rs-start = ((bf16[64,1024]{1,0}), bf16[8,1024]{1,0}) async-start(%all-gather-done), calls=%wrapped_reduce_scatter
  %all-reduce-fusion = f32[16]{0} fusion(%x), kind=kLoop, calls=%fused, metadata={op_name="jit(f)/all-reduce all-gather(x)" source_file="all-to-all.py"}
  %add.7 = f32[4]{0} add(%a, %b), metadata={op_name="%all-reduce.99 = f32[1000] all-reduce(%z), replica_groups={{0,1}}"}
  ROOT %out = bf16[64,1024]{1,0} copy(%all-gather-done), frontend_attributes={note="reduce-scatter(x)"}
}
"""


def test_synthetic_forms_async_and_traps():
    ops = {c.name: c for c in parse_hlo_text(SYNTHETIC, source="s.hlo")}
    assert set(ops) == {
        "all-gather-start",
        "all-reduce-start.2",
        "cp-start",
        "all-reduce.9",
        "reduce-scatter.4",
        "ag.5",
    }
    assert (ops["ag.5"].group_size, ops["ag.5"].num_groups) == (4, 2)  # mesh form with a device order
    ag = ops["all-gather-start"]
    assert ag.op == "all-gather" and ag.is_async and ag.result_bytes == 64 * 1024 * 2 and ag.dtype == "bf16"
    assert (ag.group_size, ag.num_groups) == (4, 2)  # iota [2,4]: 2 groups of 4, transposed or not
    ar = ops["all-reduce-start.2"]
    assert ar.result_bytes == 4096 and (ar.group_size, ar.num_groups) == (8, 1) and ar.is_async
    cp = ops["cp-start"]
    assert cp.op == "collective-permute" and cp.result_bytes == 16 and cp.num_groups == 3
    s4 = ops["all-reduce.9"]
    assert s4.result_bytes == 501 and s4.group_size == 8 and s4.num_groups == 1  # empty groups = all 8 partitions
    rs = ops["reduce-scatter.4"]
    assert rs.is_async and rs.computation == "wrapped_reduce_scatter" and (rs.group_size, rs.num_groups) == (8, 1)


def test_unknown_dtype_is_an_error_naming_the_instruction():
    with pytest.raises(ProfileError) as e:
        parse_hlo_text(
            "HloModule m\nENTRY %e {\n  %ar = q99[4]{0} all-reduce(%x), replica_groups={}\n}\n", source="m.hlo"
        )
    assert e.value.field == "ar" and "q99" in str(e.value)


def test_not_hlo_and_not_utf8(tmp_path):
    f = tmp_path / "notes.hlo.txt"
    f.write_text("hello, this is a shopping list\n")
    with pytest.raises(ProfileError, match="not HLO text"):
        read_hlo_text(f)
    f.write_bytes(b"HloModule m\n\xff\xfe")
    with pytest.raises(ProfileError, match="UTF-8"):
        read_hlo_text(f)
