"""The Critic on meshes from anywhere: each check catches what it should, with the numbers in the reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_proposals_support import LLAMA_8B, LLAMA_70B, make_report, make_run

from bot.configs.mesh import Mesh
from bot.errors import AsapError
from bot.proposals.critic import critique
from bot.proposals.failures import load_failures


def _check(result, name):  # type: ignore[no-untyped-def]
    c = result.check(name)
    assert c is not None
    return c


def test_non_multiplying_mesh_fails_product_naming_the_arithmetic(tmp_path: Path) -> None:
    run = make_run(tmp_path, num_chips=64, ici={"fsdp": 64})
    res = critique(run, Mesh(ici={"fsdp": 16, "tensor": 2}))
    c = _check(res, "product")
    assert not c.passed and c.hard
    assert "32" in c.reason and "64" in c.reason
    assert not res.ok


def test_dcn_axes_must_multiply_to_the_slices(tmp_path: Path) -> None:
    run = make_run(tmp_path, num_chips=128, num_slices=2, ici={"fsdp": 64}, dcn={"data": 2})
    res = critique(run, Mesh(ici={"fsdp": 128}))
    assert not _check(res, "product").passed
    assert "2 slice" in _check(res, "product").reason
    assert critique(run, Mesh(ici={"fsdp": 64}, dcn={"data": 2})).ok


def test_non_dividing_mesh_fails_divisibility(tmp_path: Path) -> None:
    run = make_run(tmp_path, num_chips=64, ici={"fsdp": 64})
    res = critique(run, Mesh(ici={"tensor": 64}))  # 32 query heads cannot split 64 ways
    c = _check(res, "divisibility")
    assert not c.passed and "64" in c.reason and "32" in c.reason
    assert not res.ok


def test_out_of_memory_mesh_fails_memory_naming_bytes_and_capacity(tmp_path: Path) -> None:
    run = make_run(tmp_path, chip="h100", num_chips=8, model=LLAMA_70B, ici={"data": 8},
                   training={"global_batch": 8, "seq_len": 4096, "remat": "full"})
    res = critique(run, Mesh(ici={"data": 8}))  # 70B replicated with Adam state on 80 GB GPUs
    c = _check(res, "memory")
    assert not c.passed and c.hard
    assert "out of memory" in c.reason and "GB" in c.reason and "85.5 GB" in c.reason
    assert not res.ok


def test_fitting_mesh_passes_memory_with_headroom(tmp_path: Path) -> None:
    run = make_run(tmp_path, num_chips=64, ici={"fsdp": 64})
    c = _check(critique(run, Mesh(ici={"fsdp": 64})), "memory")
    assert c.passed and not c.skipped and "headroom" in c.reason


def test_model_unknown_skips_memory_and_says_what_to_add(tmp_path: Path) -> None:
    run = make_run(tmp_path, num_chips=64, ici={"fsdp": 64}, model=None)
    c = _check(critique(run, Mesh(ici={"fsdp": 32, "tensor": 2})), "memory")
    assert c.passed and c.skipped
    assert "d_model" in c.reason


@pytest.mark.parametrize(
    ("bottleneck", "new", "ok"),
    [
        ("communication", {"fsdp": 8, "tensor": 8}, False),  # more tensor on a communication-bound run
        ("communication", {"fsdp": 16, "sequence": 2, "tensor": 2}, False),  # tensor x sequence 2 -> 4
        ("communication", {"fsdp": 64}, True),
        ("hbm", {"fsdp": 8, "tensor": 8}, False),
        ("hbm", {"fsdp": 64}, True),
        ("compute", {"fsdp": 8, "tensor": 8}, True),
    ],
)
def test_moves_against_the_diagnosis_are_warnings_weighed_against_the_prediction(
    tmp_path: Path, bottleneck: str, new: dict[str, int], ok: bool
) -> None:
    base = Mesh(ici={"fsdp": 32, "tensor": 2})
    run = make_run(tmp_path, num_chips=64, ici=dict(base.ici))
    report = make_report(run, base, bottleneck, collective_pct=40 if bottleneck == "communication" else 10)
    res = critique(run, Mesh(ici=new), report=report)  # type: ignore[arg-type]
    c = _check(res, "diagnosis")
    assert c.passed is ok, c.reason
    if not ok:  # a rule of thumb: a warning with the predicted step time, never a veto
        assert not c.hard and res.ok
        assert "model-parallel degree (tensor x sequence)" in c.reason and "weighed against the prediction" in c.reason
        assert "% step time (band +-" in c.reason


def test_trading_one_model_parallel_axis_for_another_is_not_adding_collectives(tmp_path: Path) -> None:
    base = Mesh(ici={"fsdp": 16, "sequence": 4})
    run = make_run(tmp_path, num_chips=64, ici=dict(base.ici))
    report = make_report(run, base, "communication", collective_pct=40)
    c = _check(critique(run, Mesh(ici={"fsdp": 16, "tensor": 4}), report=report), "diagnosis")  # type: ignore[arg-type]
    assert c.passed, c.reason
    assert "trades one model-parallel axis for another at the same degree (4" in c.reason
    worse = _check(critique(run, Mesh(ici={"fsdp": 8, "tensor": 8}), report=report), "diagnosis")  # type: ignore[arg-type]
    assert not worse.passed and not worse.hard and "4->8" in worse.reason


def test_heavy_axis_onto_dcn_contradicts_a_communication_bound_run(tmp_path: Path) -> None:
    base = Mesh(ici={"fsdp": 64}, dcn={"data": 2})
    run = make_run(tmp_path, num_chips=128, num_slices=2, ici={"fsdp": 64}, dcn={"data": 2})
    report = make_report(run, base, "communication", collective_pct=45)
    c = _check(critique(run, Mesh(ici={"fsdp": 64}, dcn={"fsdp": 2}), report=report), "diagnosis")
    assert not c.passed and "DCN" in c.reason


def test_host_bound_run_gets_a_soft_warning_not_a_rejection(tmp_path: Path) -> None:
    base = Mesh(ici={"fsdp": 32, "tensor": 2})
    run = make_run(tmp_path, num_chips=64, ici=dict(base.ici))
    report = make_report(run, base, "host", host_pct=40)
    res = critique(run, Mesh(ici={"fsdp": 64}), report=report)
    c = _check(res, "diagnosis")
    assert not c.passed and not c.hard and "input" in c.reason
    assert res.ok  # soft: shown with a warning


def test_known_failure_is_never_passed_again(tmp_path: Path) -> None:
    bad = {"ici": {"fsdp": 16, "tensor": 4}}
    run = make_run(tmp_path, num_chips=64, ici={"fsdp": 64},
                   failures=[{"mesh": bad, "outcome": "oom", "detail": "RESOURCE_EXHAUSTED", "source": "job 124"}])
    res = critique(run, Mesh(ici={"fsdp": 16, "tensor": 4}))
    c = _check(res, "known_failure")
    assert not c.passed and c.hard and "oom" in c.reason and "job 124" in c.reason
    assert critique(run, Mesh(ici={"fsdp": 32, "tensor": 2})).check("known_failure").passed  # type: ignore[union-attr]


def test_failure_recorded_for_another_model_does_not_apply(tmp_path: Path) -> None:
    run = make_run(tmp_path, num_chips=64, ici={"fsdp": 64},
                   failures=[{"mesh": {"ici": {"fsdp": 16, "tensor": 4}}, "outcome": "oom", "model": "llama3-70b"}])
    assert critique(run, Mesh(ici={"fsdp": 16, "tensor": 4})).check("known_failure").passed  # type: ignore[union-attr]
    assert LLAMA_8B["name"] == "llama3-8b"


def test_slower_outcome_is_a_warning_only(tmp_path: Path) -> None:
    run = make_run(tmp_path, num_chips=64, ici={"fsdp": 64},
                   failures=[{"mesh": {"ici": {"fsdp": 32, "tensor": 2}}, "outcome": "slower", "detail": "+8%"}])
    res = critique(run, Mesh(ici={"fsdp": 32, "tensor": 2}))
    c = res.check("known_failure")
    assert c is not None and not c.passed and not c.hard
    assert res.ok


def test_malformed_failures_file_names_the_field(tmp_path: Path) -> None:
    run = make_run(tmp_path, num_chips=64, ici={"fsdp": 64})
    (run.folder / "failures.yaml").write_text("schema_version: 1\nfailures:\n  - mesh: {ici: {fsdp: 64}}\n    outcome: exploded\n")
    with pytest.raises(AsapError) as exc:
        load_failures(run.folder)
    assert exc.value.field == "failures.0.outcome"
    assert "failures.yaml" in (exc.value.source or "")
    (run.folder / "failures.yaml").write_text("failures: [oops\n")
    with pytest.raises(AsapError, match="malformed YAML"):
        load_failures(run.folder)
    (run.folder / "failures.yaml").write_text("- just a list\n")
    with pytest.raises(AsapError, match="expected a mapping"):
        load_failures(run.folder)


def test_uneven_pipeline_is_a_fact_only_where_the_framework_refuses_it(tmp_path: Path) -> None:
    # Llama 3.1 405B has 126 layers; torchtitan ran it on PP8 (benchmarks/llama3_h100_202412_torchtitan.md
    # @31a17bf, Table 5). MaxText and Megatron-LM would refuse to start.
    import yaml

    model = {"layers": 126, "d_model": 16384, "d_ff": 53248, "heads": 128, "kv_heads": 8, "vocab": 128256}
    run = make_run(tmp_path / "a", chip="h100", num_chips=512, num_slices=64, ici={"tensor": 8},
                   dcn={"fsdp": 8, "pipeline": 8}, model=model,
                   training={"global_batch": 64, "seq_len": 8192, "remat": "full"})
    c = _check(critique(run, Mesh(ici={"tensor": 8}, dcn={"fsdp": 8, "pipeline": 8})), "divisibility")  # type: ignore[arg-type]
    assert not c.passed and not c.hard and "torchtitan" in c.reason  # framework 'other': a warning
    path = run.folder / "run.yaml"  # type: ignore[attr-defined]
    rec = yaml.safe_load(path.read_text())
    rec["framework"] = "maxtext"
    path.write_text(yaml.safe_dump(rec))
    from bot.runs.store import LocalRunStore

    run2 = LocalRunStore(tmp_path / "a").get("r1")
    c2 = _check(critique(run2, Mesh(ici={"tensor": 8}, dcn={"fsdp": 8, "pipeline": 8})), "divisibility")  # type: ignore[arg-type]
    assert not c2.passed and c2.hard and "pipeline=8 does not divide layers=126" in c2.reason
