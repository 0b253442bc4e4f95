"""``asap index``: build or update the knowledge index (playbooks + optimization history).

Imports history from local git repositories (``--repo``, repeatable; ``ASAP_HISTORY_REPO``) and merged
GitHub pull requests (``--github OWNER/REPO``, token from ``GITHUB_TOKEN``, ``--github-url`` for GitHub
Enterprise), stores it in ``<state dir>/history.jsonl``, then updates the BM25 index in
``<state dir>/index`` — only new or changed documents are re-imported and re-hashed.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from bot.cli import cli


@cli.command("index")
@click.option("--repo", "repos", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="Local git repository whose commits to sharding configs become history (repeatable).")
@click.option("--github", "github_repos", multiple=True, metavar="OWNER/REPO",
              help="GitHub repository whose merged PRs that changed sharding configs become history (repeatable).")
@click.option("--github-url", envvar="GITHUB_API_URL", default=None, help="GitHub API base URL (Enterprise).")
@click.option("--state-dir", envvar="ASAP_STATE_DIR", default=".asap", type=click.Path(file_okay=False, path_type=Path),
              show_default=True, help="Where history.jsonl and index/ live.")
@click.option("--playbooks", "playbooks_dir", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="Playbooks folder (default: the bundled playbooks/).")
def index_cmd(repos: tuple[Path, ...], github_repos: tuple[str, ...], github_url: str | None, state_dir: Path,
              playbooks_dir: Path | None) -> None:
    """Build or update the knowledge index from playbooks and history."""
    from knowledge.history import HistoryStore
    from knowledge.history_sources.git import git_history
    from knowledge.history_sources.github import github_history
    from knowledge.index import KnowledgeIndex
    from knowledge.playbooks import PLAYBOOKS_DIR

    store = HistoryStore(state_dir)
    known = store.load()
    if not repos and os.environ.get("ASAP_HISTORY_REPO"):
        repos = (Path(os.environ["ASAP_HISTORY_REPO"]),)
    for repo in repos:
        seen = {r.commit for r in known if r.source == "git" and r.commit}
        n = store.upsert(git_history(repo, skip_commits=seen))
        click.echo(f"git {repo}: {n} new or changed history records")
    for name in github_repos:
        seen_prs = {int(r.id.split("#", 1)[1].split(":", 1)[0]) for r in known
                    if r.source == "github" and r.id.startswith(f"github:{name}#")}
        n = store.upsert(github_history(name, token=os.environ.get("GITHUB_TOKEN"), base_url=github_url,
                                        skip_numbers=seen_prs))
        click.echo(f"github {name}: {n} new or changed history records")
    records = store.load()
    stats = KnowledgeIndex(state_dir / "index").update(playbooks_dir=playbooks_dir or PLAYBOOKS_DIR, history=records)
    click.echo(
        f"index {state_dir / 'index'}: {stats.documents} documents ({stats.added} added, {stats.changed} changed, "
        f"{stats.removed} removed, {stats.unchanged} unchanged); "
        f"{'rebuilt' if stats.rebuilt else 'up to date'} in {stats.seconds:.2f} s"
    )
