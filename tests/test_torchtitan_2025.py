"""torchtitan of 2025 read and priced as it ran: the spring-2025 config layout, async TP, float8 recipes and the
compiled loss, on real configs and published rows.

Fixtures and cases (sources in tests/data/real/README.md and each case's expected.yaml):
``tests/data/real/torchtitan/2025-spring/llama3_70b.toml`` (torchtitan @3ce5616, 1 April 2025: ``[parallelism]``
degrees with ``[training] batch_size``); the eval cases ``torchtitan-asynctp-*`` (torchtitan's June 2025 async TP
benchmark, Llama 3 70B on 256 H100 and 8B on 64 H100), ``torchao-float8-*`` (torchao's float8 README, Llama 3 8B on
8 H100 and 8 MI300X) and ``torchtitan-h200-*`` (Trainy's H200 rows in torchtitan's benchmarks).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.configs.detect import load_config, parse_config
from bot.configs.edit import config_diff
from bot.configs.torchtitan import CURRENT
from bot.proposals.engine import baseline_mesh
from bot.proposals.eval_figures import measured_points
from bot.proposals.evaluate import load_expected
from bot.runs.record import RunRecord
from bot.runs.store import LocalRunStore
from knowledge import costmodel
from knowledge.cost_settings import settings_for_run, settings_from_config
from knowledge.cost_shapes import resolve_shape
from tests.published_cases import propose_case

REAL = Path(__file__).parent / "data" / "real" / "torchtitan"
SPRING = REAL / "2025-spring" / "llama3_70b.toml"
EVAL = Path(__file__).resolve().parents[1] / "examples" / "eval"
GIB = 2**30


def _case(case: str):  # type: ignore[no-untyped-def]
    run = LocalRunStore(EVAL).get(case)
    mesh, _ = baseline_mesh(run, None)
    return run, mesh


def _point(case: str):  # type: ignore[no-untyped-def]
    run, mesh = _case(case)
    return measured_points(run, load_expected(EVAL / case / "expected.yaml"), mesh)[0]


def test_a_spring_2025_config_is_read_not_refused_as_a_mix_of_layouts() -> None:
    # torchtitan between #980 (March 2025) and #1238 (June 2025): [parallelism] degrees, [training] batch_size.
    # ASAP refused this real config as "mixing" the 2024 and 2025 layouts.
    cfg = load_config(SPRING)
    assert cfg.vintage == CURRENT
    assert cfg.mesh(64, 8).size("tensor") == 8
    s = settings_from_config(cfg)
    assert (s.local_batch, s.remat_policy, s.seq_len) == (8, "full", 8192)  # batch_size is the local batch
    # no global batch to hold before gradient accumulation (#1238): a smaller local batch is not written
    assert "batch_size" not in config_diff(cfg, cfg.mesh(64, 8), None, "llama3_70b.toml")
    # both batch names never coexisted: still refused, naming both
    both = SPRING.read_text().replace("batch_size = 8", "batch_size = 8\nlocal_batch_size = 8")
    with pytest.raises(Exception, match="mixes torchtitan layouts"):
        parse_config(both, "x.toml")


def test_async_tp_needs_compile_and_hides_half_the_tp_collectives() -> None:
    text = SPRING.read_text()
    record = RunRecord(id="r", chip="h100", num_chips=256, num_slices=32)
    async_on = text.replace("tensor_parallel_degree = 8", "tensor_parallel_degree = 8\nenable_async_tensor_parallel = true")
    compiled = async_on.replace("compile = false", "compile = true")
    assert not resolve_shape(record, settings_from_config(parse_config(async_on, "a.toml"))).tp_comm_overlap
    shape = resolve_shape(record, settings_from_config(parse_config(compiled, "b.toml")))
    assert shape.tp_comm_overlap and shape.async_tp
    assert any("enable_async_tensor_parallel" in a for a in shape.assumptions)


@pytest.mark.parametrize("model,speedup", [("70b", 652.4 / 597.3), ("8b", 4809.4 / 4378)])
def test_async_tp_gain_matches_torchtitans_benchmark(model: str, speedup: float) -> None:
    # benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md, bf16 rows: async TP 1.09x (70B), 1.10x (8B).
    # Priced as a full overlap (Megatron's --tp-comm-overlap) the gain was 1.19x.
    vanilla = _point(f"torchtitan-asynctp-h100-llama3-{model}-bf16-vanilla").predicted_step_ms
    async_ = _point(f"torchtitan-asynctp-h100-llama3-{model}-bf16-async").predicted_step_ms
    assert vanilla / async_ == pytest.approx(speedup, abs=0.03)


def test_float8_recipes_rank_as_torchao_measured_them() -> None:
    # torchao float8 README, Llama3-8b on 8 H100: bf16 6150, rowwise 6768 (+10%), tensorwise 7689.5 (+25%) tokens/s.
    # Before the recipes were read, rowwise was priced as tensorwise (+39%).
    steps = {q: _point(f"torchao-float8-h100-llama3-8b-{q}").predicted_step_ms for q in ("bf16", "fp8rw", "fp8tw")}
    assert steps["bf16"] > steps["fp8rw"] > steps["fp8tw"]
    assert steps["bf16"] / steps["fp8rw"] == pytest.approx(6768 / 6150, abs=0.05)
    run, _ = _case("torchao-float8-h100-llama3-8b-fp8rw")
    shape = resolve_shape(run.record, settings_for_run(run))
    assert shape.fp8 and shape.fp8_rowwise and not shape.tp_fp8_gather


def test_float8_rowwise_under_tp_is_priced_slower_than_bf16_as_measured() -> None:
    # torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md, Llama3 8b on 64 H100, FSDP 8 x TP 8, async TP:
    # bf16 4809.4, float8 rowwise 3914.9 tokens/s (rowwise 19% slower). Rowwise casts every linear's input and output
    # gradient twice (per row, then per column for the weight gradient), and under TP it casts the gathered input on
    # every rank. Priced with the tensorwise recipe's 7 cast bytes, rowwise came out 2% faster than bf16.
    bf16 = _point("torchtitan-asynctp-h100-llama3-8b-bf16-async").predicted_step_ms
    rowwise = _point("torchtitan-asynctp-h100-llama3-8b-fp8rw-async").predicted_step_ms
    tensorwise = _point("torchtitan-asynctp-h100-llama3-8b-fp8tw-async").predicted_step_ms
    assert rowwise > bf16 > tensorwise
    # without TP (torchao README, 8 H100, FSDP): rowwise still measures 10% faster than bf16, and is priced so
    assert (_point("torchao-float8-h100-llama3-8b-bf16").predicted_step_ms
            > _point("torchao-float8-h100-llama3-8b-fp8rw").predicted_step_ms)
    run, _ = _case("torchtitan-asynctp-h100-llama3-8b-fp8rw-async")
    assert any("casts each linear's input and output gradient twice" in a
               for a in resolve_shape(run.record, settings_for_run(run)).assumptions)


def test_float8_casts_and_the_bf16_output_layer_cost_more_on_the_smaller_model() -> None:
    # torchao's own note: "E2E speedups increase as M,K,N (GEMM dimensions) increase". The casts are HBM traffic
    # per activation element, the matmuls FLOPs per weight: their share falls with d_model.
    def gain(model: str) -> float:
        return (_point(f"torchtitan-asynctp-h100-llama3-{model}-bf16-vanilla").predicted_step_ms
                / _point(f"torchtitan-asynctp-h100-llama3-{model}-fp8tw-vanilla").predicted_step_ms)

    # measured 1.16 (8B) and 1.36 (70B); priced at the fp8 peak with no casts and an fp8 output layer: 1.35 and 1.44
    assert gain("8b") < 1.30 and gain("70b") < 1.40
    assert gain("8b") < gain("70b")


@pytest.mark.parametrize("case,measured_gib", [
    ("torchao-float8-mi300x-llama3-8b-bf16", 39.09),  # torchtitan 2c8b594 (August 2025): compiled loss
    ("torchao-float8-mi300x-llama3-8b-fp8tw", 39.07),
    ("torchao-float8-h100-llama3-8b-bf16", 47.65),  # torchtitan of March 2025 (2024 layout): eager loss
    ("torchtitan-h200-llama3-8b-fsdp32", 47.96),  # Trainy's H200 rows, torchtitan e7c0cae (June 2025): compiled
    ("torchtitan-h200-llama3-8b-fsdp64", 46.97),
])
def test_peak_memory_follows_whether_torchtitan_compiles_the_loss(case: str, measured_gib: float) -> None:
    # Same model, batch and policy; the MI300X run is 8.6 GiB lower because torchtitan compiles the loss since
    # April 2025 (#1033): 4 bytes per logit instead of eager PyTorch's 12. Priced eager, the MI300X rows were 1.25x.
    point = _point(case)
    assert point.predicted_memory_gib / measured_gib == pytest.approx(1.0, abs=0.10)


def test_config_stated_tokens_and_fp8_set_the_eval_point() -> None:
    # the 2025 cases state neither the batch nor fp8 in run.yaml: both come from the TOML and its launch flags
    point = _point("torchtitan-asynctp-h100-llama3-70b-fp8tw-async")
    assert point.family == "h100-96gb-hbm2e-500w-fp8"
    assert point.measured_step_ms == pytest.approx(16 * 8192 * 32 / (942.4 * 256) * 1000, rel=1e-6)


def test_mi300x_is_priced_at_its_fitted_efficiency() -> None:
    # torchao's 8 x MI300X bf16 row: 5376.5 tokens/s per GPU. At the default 75% of the 1307 TFLOP/s datasheet
    # the prediction was 1.8x too fast, uncalibrated.
    point = _point("torchao-float8-mi300x-llama3-8b-bf16")
    assert point.measured_step_ms / point.predicted_step_ms == pytest.approx(1.0, abs=0.08)
    run, mesh = _case("torchao-float8-mi300x-llama3-8b-bf16")
    assert costmodel.predict(run.record, mesh, settings=settings_for_run(run)).step_time_ms > 0


ROWWISE_ADVICE = "rowwise-fp8-under-tp"
ROWWISE_SECTION = "playbooks/bottlenecks.md#float8-rowwise-under-tensor-parallelism"


@pytest.mark.parametrize("case,recipe", [("torchtitan-asynctp-h100-llama3-8b-fp8rw-async", "rowwise"),
                                         ("torchtitan-asynctp-h100-llama3-8b-fp8tw-async", "tensorwise"),
                                         ("torchao-float8-mi300x-llama3-8b-fp8rwgw", "rowwise")])
def test_torchtitans_float8_converter_states_its_recipe(case: str, recipe: str) -> None:
    # [model] converters float8 with [float8] recipe_name (unset: tensorwise): the recipe is the config's, not guessed,
    # so on a Blackwell chip an unstated-recipe band (MXFP8 or per-tensor?) would be wrong for these runs
    run, _ = _case(case)
    shape = resolve_shape(run.record, settings_for_run(run))
    assert shape.fp8_recipe == recipe and "fp8_recipe" not in shape.guessed


def test_rowwise_float8_under_tp_is_told_what_torchtitan_measured(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The 8B rowwise async TP row (FSDP 8 x TP 8, measured 19% under bf16) gets the filter / tensorwise advice, with
    the benchmark's figures and its playbook section cited."""
    monkeypatch.setenv("ASAP_STATE_DIR", str(tmp_path))
    advice = [a for a in propose_case("torchtitan-asynctp-h100-llama3-8b-fp8rw-async").advice if a.id == ROWWISE_ADVICE]
    assert advice and advice[0].citation == ROWWISE_SECTION
    assert "3,915 against 4,809 tokens/s" in advice[0].text and "auto_filter_small_kn" in advice[0].text


@pytest.mark.parametrize("case", ["torchao-float8-h100-llama3-8b-fp8rw",  # rowwise without TP: 10% over bf16
                                  "torchtitan-asynctp-h100-llama3-8b-fp8tw-async"])  # tensorwise under TP
def test_the_rowwise_advice_stays_away_from_other_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       case: str) -> None:
    monkeypatch.setenv("ASAP_STATE_DIR", str(tmp_path))
    assert not any(a.id == ROWWISE_ADVICE for a in propose_case(case).advice)
