"""`asap runs`, `asap show`, `asap why`: happy paths on a runs folder written here, and every error path."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.analyze  # noqa: F401  (registers the commands on the group)
from bot.cli import cli, main
from bot.errors import AsapError

REPO = Path(__file__).resolve().parents[1]
ASAP = REPO / ".venv" / "bin" / "asap"

STEPS = 5
STEP_MS = 100.0


def _table(cols: list[tuple[str, str]], rows: list[list[object]], p: dict[str, str] | None = None) -> dict:
    return {
        "cols": [{"id": c, "label": c, "type": t} for c, t in cols],
        "rows": [{"c": [{"v": v} for v in row]} for row in rows],
        "p": p or {},
    }


def write_comm_bound_run(root: Path, run_id: str = "123") -> Path:
    """A TPU v5p-8 run whose profile spends ~48% of the step in collectives while the device is 99% busy."""
    folder = root / run_id
    folder.mkdir(parents=True)
    (folder / "run.yaml").write_text(
        f"id: '{run_id}'\n"
        "name: llama fsdp on v5p-8\n"
        "chip: tpu-v5p\n"
        "num_chips: 8\n"
        "config: maxtext.yml\n"
        "profile: [hlo_stats.json, overview_page.json]\n"
        "model: {name: llama3-8b, layers: 32, d_model: 4096, d_ff: 14336, heads: 32, kv_heads: 8, vocab: 128256}\n"
        "training: {global_batch: 8, seq_len: 1024}\n",
        encoding="utf-8",
    )
    (folder / "maxtext.yml").write_text(
        "# mesh\nici_fsdp_parallelism: 8\nici_tensor_parallelism: 1\n", encoding="utf-8"
    )
    window_us = STEPS * STEP_MS * 1000
    hlo = _table(
        [("hlo_op_name", "string"), ("category", "string"), ("occurrences", "number"), ("total_time", "number"),
         ("normalized_flop_rate", "number"), ("hbm_bw", "number"), ("bound_by", "string")],
        [
            ["fusion.1", "convolution fusion", 5 * 32, 0.40 * window_us, 2.5e5, 500.0, "Compute"],
            ["all-reduce.1", "all-reduce", 5 * 2, 0.36 * window_us, 0.0, 0.0, "Unknown"],
            ["all-gather.2", "all-gather", 5 * 64, 0.12 * window_us, 0.0, 0.0, "Unknown"],
            ["fusion.2", "loop fusion", 5 * 64, 0.08 * window_us, 1000.0, 2000.0, "HBM"],
        ],
    )
    (folder / "hlo_stats.json").write_text(json.dumps(hlo), encoding="utf-8")
    overview = [
        {"cols": [], "rows": [], "p": {"device_duty_cycle_percent": "99.0%"}},
        _table(
            [("stepnum", "string"), ("stepTimeMs", "number")],
            [[str(i), STEP_MS] for i in range(STEPS)],
            {"hardware_type": "TPU"},
        ),
        {"cols": [], "rows": [], "p": {"device_type": "TPU v5p", "device_core_count": "8"}},
    ]
    (folder / "overview_page.json").write_text(json.dumps(overview), encoding="utf-8")
    return folder


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    write_comm_bound_run(root)
    return root


def invoke(runs_dir: Path, *args: str):  # noqa: ANN201
    return CliRunner().invoke(cli, ["--runs-dir", str(runs_dir), *args], catch_exceptions=False)


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


# ---- happy paths ------------------------------------------------------------------------------------------
def test_runs_lists_id_chips_mesh_and_model(runs_dir: Path) -> None:
    result = invoke(runs_dir, "runs")
    assert result.exit_code == 0, result.output
    for text in ("123", "tpu-v5p x 8", "fsdp=8", "llama3-8b"):
        assert text in result.output
    data = json.loads(invoke(runs_dir, "runs", "--json").output)
    assert data["runs"][0]["id"] == "123" and data["runs"][0]["mesh"] == "fsdp=8"


def test_show_prints_record_config_and_profile_files(runs_dir: Path) -> None:
    result = invoke(runs_dir, "show", "run-123")
    assert result.exit_code == 0, result.output
    for text in ("Run 123", "chip: tpu-v5p", "maxtext.yml", "format: maxtext", "mesh: fsdp=8", "hlo_stats.json", "overview_page.json"):
        assert text in result.output
    data = json.loads(invoke(runs_dir, "show", "123", "--json").output)
    assert data["config"]["format"] == "maxtext"
    assert [f["path"] for f in data["profile_files"]] == ["hlo_stats.json", "overview_page.json"]
    assert all(f["exists"] for f in data["profile_files"])


def test_show_flags_missing_profile_files(runs_dir: Path) -> None:
    (runs_dir / "123" / "overview_page.json").unlink()
    data = json.loads(invoke(runs_dir, "show", "123", "--json").output)
    assert {f["path"]: f["exists"] for f in data["profile_files"]} == {"hlo_stats.json": True, "overview_page.json": False}
    assert "(missing)" in invoke(runs_dir, "show", "123").output


def test_why_json_is_the_report_only(runs_dir: Path) -> None:
    result = invoke(runs_dir, "why", "job 123", "--json", "--top", "3")
    assert result.exit_code == 0
    report = json.loads(result.output)  # stdout holds nothing but the JSON
    assert report["diagnosis"]["bottleneck"] == "communication"
    assert 0 < report["diagnosis"]["confidence"] <= 1
    assert len(report["top_ops"]) == 3
    assert report["top_ops"][0]["name"] == "fusion.1"
    assert report["kpis"]["collective_percent"] == pytest.approx(48.0)
    assert report["run"]["config_format"] == "maxtext"
    assert any("busy device" in c for c in report["diagnosis"]["conflicts"])


def test_why_human_output_has_headline_tables_evidence_and_conflicts(runs_dir: Path) -> None:
    result = CliRunner().invoke(cli, ["--runs-dir", str(runs_dir), "why", "123"], catch_exceptions=False, terminal_width=160)
    out = result.output
    assert result.exit_code == 0, out
    assert "Run 123 is communication-bound (confidence 0." in out
    for section in ("KPIs", "Top 4 ops by time", "Evidence", "Conflicts", "Confidence"):
        assert section in out
    assert "all-reduce.1" in out and "device duty cycle" in out


def test_runs_dir_from_environment(runs_dir: Path) -> None:
    result = CliRunner().invoke(cli, ["runs"], env={"ASAP_RUNS_DIR": str(runs_dir)}, catch_exceptions=False)
    assert "123" in result.output


def test_broken_config_is_unusable_input_but_the_report_still_prints(runs_dir: Path) -> None:
    (runs_dir / "123" / "maxtext.yml").write_text("ici_fsdp_parallelism: 3\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["--runs-dir", str(runs_dir), "why", "123", "--json"])
    assert isinstance(result.exception, AsapError) and "maxtext.yml" in result.exception.render()  # main(): exit 2
    report = json.loads(result.output)
    assert report["run"]["mesh"] is None
    assert any("sharding config not used" in w and "maxtext.yml" in w for w in report["warnings"])
    assert "config error" in invoke(runs_dir, "runs").output


def test_runs_shows_an_unreadable_run_instead_of_hiding_it(runs_dir: Path) -> None:
    bad = runs_dir / "bad-run"
    bad.mkdir()
    (bad / "run.yaml").write_text("id: bad-run\nchip: tpu-v5p\nnum_chips: -4\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["--runs-dir", str(runs_dir), "runs"], catch_exceptions=False, terminal_width=200)
    assert result.exit_code == 0
    assert "123" in result.output
    assert "unreadable" in result.output and "num_chips" in result.output


# ---- errors: one clear line, exit 2, never a traceback ------------------------------------------------------
def test_unknown_run_lists_the_nearest_ids(runs_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_comm_bound_run(runs_dir, "124")
    code, out, err = run_main(capsys, "--runs-dir", str(runs_dir), "why", "run 125")
    assert code == 2 and out == ""
    assert "no run '125'" in err and "nearest known runs" in err and "123" in err and "124" in err
    assert "Traceback" not in err


def test_missing_runs_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(capsys, "--runs-dir", str(tmp_path / "nowhere"), "runs")
    assert code == 2
    assert "runs directory does not exist" in err and "nowhere" in err


def test_unknown_chip_names_run_yaml(runs_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = runs_dir / "123" / "run.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("tpu-v5p", "tpu-v9z"), encoding="utf-8")
    code, _, err = run_main(capsys, "--runs-dir", str(runs_dir), "why", "123")
    assert code == 2
    assert "unknown chip 'tpu-v9z'" in err and "run.yaml" in err


def test_malformed_profile_is_a_clear_error(runs_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (runs_dir / "123" / "hlo_stats.json").write_text("{not json", encoding="utf-8")
    (runs_dir / "123" / "overview_page.json").write_text("[]", encoding="utf-8")
    code, _, err = run_main(capsys, "--runs-dir", str(runs_dir), "why", "123")
    assert code == 2
    assert "hlo_stats.json" in err or "profile" in err.lower()
    assert "Traceback" not in err


def test_bad_top_value_is_a_usage_error(runs_dir: Path) -> None:
    result = CliRunner().invoke(cli, ["--runs-dir", str(runs_dir), "why", "123", "--top", "-1"])
    assert result.exit_code == 2 and "--top" in result.output


@pytest.mark.skipif(not ASAP.exists(), reason="console script not installed in .venv")
def test_installed_asap_prints_errors_without_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "ASAP_RUNS_DIR": str(tmp_path / "missing")}
    proc = subprocess.run([str(ASAP), "why", "123"], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error:") and "Traceback" not in proc.stderr
    assert proc.stdout == ""


@pytest.mark.skipif(not ASAP.exists(), reason="console script not installed in .venv")
def test_installed_asap_why_json_on_a_written_run(runs_dir: Path) -> None:
    env = {**os.environ, "ASAP_RUNS_DIR": str(runs_dir)}
    proc = subprocess.run([str(ASAP), "why", "123", "--json"], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["diagnosis"]["bottleneck"] == "communication"


def test_every_bundled_sample_run_is_diagnosed(example_runs: Path) -> None:
    ids = sorted(p.name for p in example_runs.iterdir() if (p / "run.yaml").is_file())
    assert ids, "no sample runs bundled"
    for run_id in ids:
        result = invoke(example_runs, "why", run_id, "--json")
        report = json.loads(result.output)
        assert report["diagnosis"]["bottleneck"] in {"compute", "hbm", "communication", "host"}, run_id
        assert report["diagnosis"]["evidence"], run_id





def test_sample_runs_get_the_bottleneck_their_readme_states(example_runs: Path) -> None:
    """examples/runs/README.md lists, per sample run, the bottleneck a performance engineer would name."""
    readme = example_runs / "README.md"
    if not readme.is_file():
        pytest.skip("examples/runs/README.md not present")
    import re

    expected = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `([^`]+)` \|.*\*\*(compute|hbm|communication|host)[^*]*\*\* \|$", readme.read_text(encoding="utf-8"), re.MULTILINE)
    }
    near = set(re.findall(r"^\| `([^`]+)` \|.*\*\*compute \(near-optimal\)\*\* \|$", readme.read_text(encoding="utf-8"), re.MULTILINE))
    assert expected, "README table has no expected bottlenecks"
    for run_id, bottleneck in expected.items():
        report = json.loads(invoke(example_runs, "why", run_id, "--json").output)
        assert report["diagnosis"]["bottleneck"] == bottleneck, (run_id, report["diagnosis"]["summary"])
        assert report["diagnosis"]["near_optimal"] == (run_id in near), run_id


def test_show_lists_discovered_files_when_run_yaml_names_none(runs_dir: Path) -> None:
    path = runs_dir / "123" / "run.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("profile: [hlo_stats.json, overview_page.json]\n", ""), encoding="utf-8")
    (runs_dir / "123" / "plugins" / "profile" / "s1").mkdir(parents=True)
    (runs_dir / "123" / "plugins" / "profile" / "s1" / "host.trace.json.gz").write_bytes(b"\x1f\x8b")
    data = json.loads(invoke(runs_dir, "show", "123", "--json").output)
    found = [f["path"] for f in data["profile_files"]]
    assert found == ["hlo_stats.json", "overview_page.json", "plugins/profile/s1/host.trace.json.gz"]
    assert "found in the run folder" in invoke(runs_dir, "show", "123").output
