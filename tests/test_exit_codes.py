"""Exit status: unusable input exits 2; partial damage (one bad profile file among others) exits 0, with the
warning printed first and the confidence lowered (README, "Exit status")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bot.cli import main

REPO = Path(__file__).resolve().parents[1]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "examples" / "runs" / "311", tmp_path / "311")
    return tmp_path


@pytest.mark.parametrize("damage", ["{not json", "", "\x00\x01garbage\xff".encode("latin-1").decode("latin-1")])
def test_one_damaged_profile_file_exits_0_warns_first_and_lowers_confidence(
        runs: Path, capsys: pytest.CaptureFixture[str], damage: str) -> None:
    code, out, _ = _run(capsys, "--runs-dir", str(runs), "why", "311", "--json")
    intact = json.loads(out)
    intact_proposals = json.loads(_run(capsys, "--runs-dir", str(runs), "propose", "311", "--json")[1])
    (runs / "311" / "hlo_stats.json").write_text(damage, encoding="utf-8")

    code, out, err = _run(capsys, "--runs-dir", str(runs), "why", "311", "--json")
    assert code == 0, err
    damaged = json.loads(out)
    assert damaged["damaged_inputs"] and damaged["damaged_inputs"][0].startswith("hlo_stats.json")
    assert damaged["diagnosis"]["confidence"] < intact["diagnosis"]["confidence"]
    assert "could not be read (hlo_stats.json)" in damaged["diagnosis"]["confidence_reasons"][0]

    code, out, err = _run(capsys, "--runs-dir", str(runs), "why", "311")
    assert code == 0, err
    assert out.splitlines()[0].startswith("warning: hlo_stats.json")

    code, out, err = _run(capsys, "--runs-dir", str(runs), "propose", "311")
    assert code == 0, err
    assert out.splitlines()[0].startswith("warning: hlo_stats.json")
    code, out, _ = _run(capsys, "--runs-dir", str(runs), "propose", "311", "--json")
    first = json.loads(out)["proposals"][0]
    assert first["confidence"] < intact_proposals["proposals"][0]["confidence"]


def test_unusable_config_exits_2(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (runs / "311" / "maxtext.yml").write_text("ici_fsdp_parallelism: 3\n", encoding="utf-8")
    for command in ("why", "propose"):
        code, _, err = _run(capsys, "--runs-dir", str(runs), command, "311")
        assert code == 2, command
        assert "maxtext.yml" in err and "ici_fsdp_parallelism" in err and "Traceback" not in err


def test_no_usable_profile_exits_2(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("hlo_stats.json", "overview_page.json", "roofline_model.json"):
        (runs / "311" / name).write_text("garbage", encoding="utf-8")
    code, out, err = _run(capsys, "--runs-dir", str(runs), "why", "311")
    assert code == 2 and out == "" and "no usable profile data" in err
