"""apply_proposal and ``asap apply`` on real git repositories in tmp_path (the embedded code host)."""

from __future__ import annotations

import difflib
import functools
import subprocess
from pathlib import Path

import pytest

from bot.apply import apply_proposal, branch_name
from bot.cli import main
from bot.configs.detect import parse_config
from bot.errors import AsapError
from integrations.codehost.localgit import LocalGitHost

RUNS = Path(__file__).resolve().parents[1] / "examples" / "runs"
CFG = (RUNS / "123" / "maxtext.yml").read_text()
MESH_KEYS = {f"{net}_{axis}_parallelism" for net in ("ici", "dcn")
             for axis in ("data", "fsdp", "tensor", "sequence", "expert", "pipeline")}


@functools.cache
def proposals_123():  # type: ignore[no-untyped-def]
    """Run 123's proposals from the deterministic engine (what apply picks from)."""
    from bot.analysis.analyze import analyze_run
    from bot.proposals.engine import propose
    from bot.runs.store import LocalRunStore

    run = LocalRunStore(RUNS).get("123")
    return propose(run, analyze_run(run))


def mesh_rank() -> int:
    """Rank of run 123's first proposal that changes only the mesh."""
    ps = proposals_123()
    return next(p.rank for p in ps.proposals if p.mesh != ps.baseline.mesh and not p.settings)


def settings_rank() -> int:
    """Rank of run 123's first proposal that changes settings (e.g. the remat policy) on the same mesh."""
    ps = proposals_123()
    return next(p.rank for p in ps.proposals if p.settings and p.mesh == ps.baseline.mesh)


def other_rank(*taken: int) -> int:
    return next(p.rank for p in proposals_123().proposals if p.rank not in taken)


def changed_keys(before: str, after: str) -> list[str]:
    """The YAML key of every line removed or added between two texts (line by line, via difflib)."""
    keys = []
    for line in difflib.ndiff(before.split("\n"), after.split("\n")):
        if line[:2] in ("- ", "+ "):
            keys.append(line[2:].split(":", 1)[0].strip())
    return keys


def assert_only_proposal_lines(before: str, after: str, settings: dict) -> None:
    """Every changed line holds a mesh key or one of the proposal's settings keys, and some line changed."""
    allowed = MESH_KEYS | {str(k).rsplit(".", 1)[-1] for k in settings}
    keys = changed_keys(before, after)
    assert keys, "nothing changed"
    assert set(keys) <= allowed, sorted(set(keys) - allowed)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "llm"
    subprocess.run(["git", "init", "-q", "-b", "main", str(r)], check=True)
    (r / "configs").mkdir()
    (r / "configs" / "llama3-8b.yml").write_text(CFG)
    (r / "README.md").write_text("hi\n")
    git(r, "add", ".")
    git(r, "-c", "user.name=Dev", "-c", "user.email=dev@acme.dev", "commit", "-qm", "init")
    return r


def test_mesh_proposal_makes_one_bot_commit_on_a_branch_and_leaves_the_worktree_alone(repo: Path):
    n = mesh_rank()
    (repo / "README.md").write_text("uncommitted work\n")  # the person's dirty tree must survive
    host = LocalGitHost(repo)
    res = apply_proposal("123", n, None, host, config_path="configs/llama3-8b.yml")
    branch = f"asap/123-p{n}"
    assert res.created and res.status == "created" and res.branch == branch
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert (repo / "README.md").read_text() == "uncommitted work\n"
    assert (repo / "configs" / "llama3-8b.yml").read_text() == CFG
    assert git(repo, "rev-list", "--count", f"main..{branch}") == "1"
    bot = "asap-bot@users.noreply.github.com"
    assert git(repo, "log", "-1", "--format=%ae %ce", branch) == f"{bot} {bot}"
    assert git(repo, "diff", "--name-only", "main", branch) == "configs/llama3-8b.yml"
    after = git(repo, "show", f"{branch}:configs/llama3-8b.yml") + "\n"
    keys = changed_keys(CFG, after)
    assert keys and set(keys) <= MESH_KEYS  # a mesh-only proposal touches mesh lines and nothing else
    want = proposals_123().proposals[n - 1].mesh_short
    assert parse_config(after).mesh(64, 1).short() == want
    assert res.diff.startswith("--- a/configs/llama3-8b.yml")
    assert "the mesh lines" in git(repo, "log", "-1", "--format=%B", branch)


def test_settings_proposal_applies_its_settings_lines_and_nothing_else(repo: Path):
    n = settings_rank()
    p = proposals_123().proposals[n - 1]
    res = apply_proposal("123", n, None, LocalGitHost(repo), config_path="configs/llama3-8b.yml")
    assert res.status == "created" and res.branch == f"asap/123-p{n}"
    after = git(repo, "show", f"asap/123-p{n}:configs/llama3-8b.yml") + "\n"
    assert_only_proposal_lines(CFG, after, p.settings)
    assert not set(changed_keys(CFG, after)) & MESH_KEYS  # the mesh is unchanged, so are its lines
    assert parse_config(after).mesh(64, 1) == parse_config(CFG).mesh(64, 1)
    for key, value in p.settings.items():  # the file now says what the proposal says
        line = next(x for x in after.split("\n") if x.split(":", 1)[0].strip() == key.rsplit(".", 1)[-1])
        assert str(value) in line, (key, line)
    message = git(repo, "log", "-1", "--format=%B", res.branch)
    assert p.settings_changes[0] in message and "Only the lines this proposal changes" in message
    assert "Mesh " not in message  # no mesh change is claimed
    assert p.settings_changes[0].split(" ")[0] in res.message  # the reply names what changes


def test_applying_again_is_idempotent_and_follows_a_moved_base(repo: Path):
    host = LocalGitHost(repo)
    n = settings_rank()
    first = apply_proposal("123", n, None, host, config_path="configs/llama3-8b.yml")
    again = apply_proposal("123", n, None, host, config_path="configs/llama3-8b.yml")
    assert again.status == "unchanged" and again.commit_sha == first.commit_sha and not again.created
    assert again.pull_number == first.pull_number and len(host.open_pulls()) == 1
    (repo / "README.md").write_text("moved on\n")
    git(repo, "-c", "user.name=Dev", "-c", "user.email=dev@acme.dev", "commit", "-qam", "more")
    moved = apply_proposal("123", n, None, host, config_path="configs/llama3-8b.yml")
    assert moved.status == "updated" and moved.commit_sha != first.commit_sha
    assert git(repo, "rev-list", "--count", f"main..asap/123-p{n}") == "1"  # still one commit, on the new main


def test_one_open_apply_per_config_then_free_after_merge(repo: Path):
    host = LocalGitHost(repo)
    n = mesh_rank()
    m = other_rank(n)
    apply_proposal("123", n, None, host, config_path="configs/llama3-8b.yml")
    locked = apply_proposal("123", m, None, host, config_path="configs/llama3-8b.yml")
    assert locked.status == "locked" and locked.branch == f"asap/123-p{n}" and "already open" in locked.message
    assert f"asap/123-p{m}" not in git(repo, "branch", "--list")
    git(repo, "merge", "-q", "--ff-only", f"asap/123-p{n}")
    res = apply_proposal("123", m, None, host, config_path="configs/llama3-8b.yml")
    assert res.status == "created" and res.branch == f"asap/123-p{m}"  # the lock is gone once the first is merged


def test_a_proposal_already_in_the_config_has_nothing_to_apply(repo: Path):
    host = LocalGitHost(repo)
    n = settings_rank()
    apply_proposal("123", n, None, host, config_path="configs/llama3-8b.yml")
    git(repo, "merge", "-q", "--ff-only", f"asap/123-p{n}")
    git(repo, "branch", "-q", "-D", f"asap/123-p{n}")
    with pytest.raises(AsapError, match="nothing to apply"):
        apply_proposal("123", n, None, host, config_path="configs/llama3-8b.yml")


def test_human_commit_on_the_bot_branch_stops_rewriting(repo: Path):
    host = LocalGitHost(repo)
    apply_proposal("123", 1, None, host, config_path="configs/llama3-8b.yml")
    git(repo, "checkout", "-q", "asap/123-p1")
    (repo / "README.md").write_text("by hand\n")
    git(repo, "-c", "user.name=Dev", "-c", "user.email=dev@acme.dev", "commit", "-qam", "tweak")
    human = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    res = apply_proposal("123", 1, None, host, config_path="configs/llama3-8b.yml")
    assert res.status == "human_push" and "no longer rewrites" in res.message and "dev@acme.dev" in res.message
    assert git(repo, "rev-parse", "asap/123-p1") == human


@pytest.mark.parametrize("bad", ["../../etc/passwd", "/etc/passwd", ".git/config", "configs/../../x.yml",
                                 "https://evil.example/x.yml"])
def test_paths_outside_the_repository_are_refused(repo: Path, bad: str):
    with pytest.raises(AsapError) as exc:
        apply_proposal("123", 1, None, LocalGitHost(repo), config_path=bad)
    assert exc.value.field == "config_path"
    assert git(repo, "branch", "--list", "asap/*") == ""


def test_config_found_through_asap_yml_link(repo: Path):
    (repo / ".asap.yml").write_text('runs:\n  configs/llama3-8b.yml: "123"\n')
    git(repo, "add", ".asap.yml")
    git(repo, "-c", "user.name=Dev", "-c", "user.email=dev@acme.dev", "commit", "-qm", "link")
    res = apply_proposal("123", 1, None, LocalGitHost(repo))
    assert res.config_path == "configs/llama3-8b.yml"


def test_unknown_config_says_how_to_name_it(repo: Path):
    with pytest.raises(AsapError) as exc:
        apply_proposal("123", 1, None, LocalGitHost(repo))
    assert "--config" in (exc.value.hint or "")


def test_not_a_git_repository(tmp_path: Path):
    with pytest.raises(AsapError, match="not a git repository"):
        LocalGitHost(tmp_path)


def test_branch_names_are_safe():
    from integrations.codehost.base import safe_branch

    for run in ("job 12/../x", "../../etc", "a..b", "run 123", "-x-"):
        name = branch_name(run, 2)
        assert safe_branch(name) == name and ".." not in name and name.endswith("-p2")
    assert branch_name("run 123", 1) == "asap/run-123-p1"


def test_cli_apply_prints_the_diff_and_exits_1_when_locked(repo: Path, capsys):
    import bot.cli.apply  # noqa: F401  (registers the command until bot/cli/__init__.py does)

    n = mesh_rank()
    main(["apply", "123", str(n), "--repo", str(repo), "--config", "configs/llama3-8b.yml"])
    out = capsys.readouterr().out
    assert "+ici_" in out and "-ici_" in out and f"asap/123-p{n}" in out
    with pytest.raises(SystemExit) as exc:
        main(["apply", "123", str(other_rank(n)), "--repo", str(repo), "--config", "configs/llama3-8b.yml"])
    assert exc.value.code == 1
    assert "already open" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["apply", "123", "1", "--repo", str(repo), "--config", "../x.yml"])
    assert exc.value.code == 2


def test_model_unknown_run_applies_with_profile_relative_numbers_and_no_false_memory_verdict(tmp_path: Path):
    from test_proposals_support import make_report, make_run

    from bot.configs.mesh import Mesh
    from bot.proposals.engine import propose
    from bot.runs.store import LocalRunStore
    from integrations.github.handlers import render_explain

    run = make_run(tmp_path / "runs", num_chips=64, ici={"fsdp": 8, "tensor": 8}, model=None)
    report = make_report(run, Mesh(ici={"fsdp": 8, "tensor": 8}), "communication", collective_pct=45)
    pset = propose(run, report)
    assert not pset.model_known and pset.proposals[0].predicted.memory_per_chip_bytes is None
    text = (tmp_path / "runs" / "r1" / "mesh.yml").read_text()
    r = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(r)], check=True)
    (r / "mesh.yml").write_text(text)
    git(r, "add", ".")
    git(r, "-c", "user.name=Dev", "-c", "user.email=dev@acme.dev", "commit", "-qm", "init")
    host = LocalGitHost(r)
    res = apply_proposal("r1", 1, None, host, runs=LocalRunStore(tmp_path / "runs"), report=report, proposals=pset)
    assert res.status == "created" and res.config_path == "mesh.yml"
    p = pset.proposals[0]
    step = f"- step time {pset.baseline.measured_step_ms:.1f} (measured) -> {p.predicted.step_time_ms:.1f} ms"
    body = host.open_pulls()[0].body
    assert step in body  # the profile-relative prediction is shown, against the measured step
    assert "- memory per chip not computed: the model shape is unknown" in body and "DOES NOT FIT" not in body
    explained = render_explain(pset, 1)  # the GitHub explain reply for the same proposal
    assert "Proposal 1 for run r1" in explained and step in explained
    assert "- memory per chip not computed" in explained and "None" not in explained
