"""The MaxText TPU README cases carry the configuration their figures were measured on (2023), reproducibly.

The v4 / v5e / v5p tables of AI-Hypercomputer/maxtext have not changed since 2023, while their scripts and base.yml
were retuned; scripts/eval_cases_maxtext_readme.py writes the cases from the scripts committed with the tables
(v5p and v4 @ 76bd53b0f, 2023-12-15; v5e @ e47fa1b5d, 2023-10-31).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.published_cases import load_script

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "examples" / "eval"


def _script():  # type: ignore[no-untyped-def]
    return load_script("eval_cases_maxtext_readme")


def test_the_committed_cases_are_what_the_script_writes(tmp_path: Path) -> None:
    """Re-running the script over the committed cases changes nothing: the corpus is reproducible from it."""
    folders = sorted(p for p in EVAL.glob("maxtext-v*-*b-*x*") if p.name.split("-")[1] in ("v4", "v5e", "v5p"))
    assert len(folders) == 46
    for f in folders:
        shutil.copytree(f, tmp_path / f.name)
    assert _script().main(["x", str(tmp_path)]) == 0
    for f in folders:
        for name in ("run.yaml", "mesh.yml", "expected.yaml"):
            assert (tmp_path / f.name / name).read_text() == (f / name).read_text(), f"{f.name}/{name}"


@pytest.mark.parametrize(("scale", "params_b"), [(16, 16), (32, 32), (64, 64), (128, 128), (256, 256), (512, 512),
                                                 (1024, 1024)])
def test_2023_dimensions_give_the_parameter_count_the_scale_names(scale: int, params_b: int) -> None:
    """get_individual_scales of 2023 (head_dim 256, relu MLP): global_parameter_scale N builds an ~N-billion model."""
    d, heads, ff, layers = _script().dims_2023(scale)
    per_layer = 4 * d * heads * 256 + 2 * d * ff
    assert layers * per_layer / 1e9 == pytest.approx(params_b, rel=0.04)


def test_v5p_512b_runs_as_published_at_tensor_16() -> None:
    """MaxText/configs/v5p/512b.sh @ 76bd53b0f: ici_tensor_parallelism=16 (8 only from February 2024), batch 2."""
    case = EVAL / "maxtext-v5p-512b-1x1024"
    mesh = yaml.safe_load((case / "mesh.yml").read_text())
    assert mesh["ici_tensor_parallelism"] == 16 and mesh["per_device_batch_size"] == 2
    expected = yaml.safe_load((case / "expected.yaml").read_text())
    assert expected["adopted_mesh"]["ici"] == {"fsdp": 32, "tensor": 16}
    assert "76bd53b0f44caf989c88189afadeb1062f9254f0" in expected["url"]
    model = yaml.safe_load((case / "run.yaml").read_text())["model"]
    assert (model["head_dim"], model["vocab"], model["mlp_matrices"], model["tied_embeddings"]) == (256, 32768, 2, True)
