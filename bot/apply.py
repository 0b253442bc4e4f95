"""Apply a proposal: a bot-owned branch, one commit that edits only the lines the proposal changes, and a PR.

``apply_proposal(run_id, index, requester, host, config_path=None)`` is what ``asap apply``, the GitHub
``@asap apply N`` mention and Slack's Apply button call. It

1. analyses the run and proposes (deterministic engine), and picks proposal ``index`` (1-based rank);
2. finds the repository config the run is measured by: ``config_path``, else the config linked to the
   run in the default branch's ``.asap.yml``, else the run's own config file name at the repository root;
3. refuses to start a second apply PR for a config that already has one open (it points to it instead);
4. stops, and says so, when a person has pushed to the bot's branch ``asap/<run>-p<N>``;
5. rewrites the WHOLE proposal and nothing else: its mesh values and its settings values (micro-batch,
   remat policy, per-device batch, accumulation steps; ``proposal.settings``) with
   :func:`bot.configs.edit.apply_changes` (byte-preserving round trip) on top of the default branch, commits
   as the bot, and opens the change request or updates the existing one.

The rule is "only the lines the proposal changes": every changed line holds a mesh key or one of the
proposal's settings keys (a settings key the file lacks becomes one added line). A mesh-only proposal
therefore edits only mesh lines, and a settings-only proposal (same mesh) only its setting lines.

Authorization is the caller's job (:mod:`bot.auth`). Applying twice is idempotent: the same branch and the
same change request, updated; when nothing changed no commit is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot import fmt
from bot.configs.detect import for_run, load_config, parse_config
from bot.configs.edit import apply_changes, diff_text
from bot.configs.mesh import Mesh
from bot.configs.sharding import ShardingConfig
from bot.errors import AsapError, ConfigError, brief
from integrations.codehost.base import CodeHost, PullRequest, safe_repo_path

if TYPE_CHECKING:
    from bot.analysis.report import AnalysisReport
    from bot.proposals.models import Proposal, ProposalSet
    from bot.runs.store import Run, RunStore

MARKER_RE = re.compile(r"<!-- asap:apply run=(?P<run>\S+) proposal=(?P<n>\d+) config=(?P<config>\S+) -->")


@dataclass
class ApplyResult:
    """What happened; ``message`` is the one line to show the person who asked."""

    url: str
    branch: str
    created: bool
    message: str
    status: str = "created"  # created | updated | unchanged | locked | human_push
    pull_number: int | None = None
    config_path: str | None = None
    commit_sha: str | None = None
    diff: str = ""
    notes: list[str] = field(default_factory=list)


def branch_name(run_id: str, index: int) -> str:
    """``asap/<run>-p<N>`` with the run ID reduced to branch-safe characters."""
    safe = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9._-]+", "-", run_id)).strip("-.") or "run"
    return f"asap/{safe[:60]}-p{index}"


def marker(run_id: str, index: int, config_path: str) -> str:
    return f"<!-- asap:apply run={re.sub(r'[^A-Za-z0-9._-]+', '-', run_id)} proposal={index} config={config_path} -->"


def pick_proposal(pset: ProposalSet, index: int) -> Proposal:
    """Proposal of rank ``index``; a clear error when there is no such proposal (or none at all)."""
    if not pset.proposals:
        raise AsapError(f"run {pset.run_id} has no proposal to apply: {pset.summary}", field="proposal")
    for p in pset.proposals:
        if p.rank == index:
            return p
    raise AsapError(f"run {pset.run_id} has {len(pset.proposals)} proposal(s); there is no proposal {index}",
                    field="proposal", hint=f"pick 1-{len(pset.proposals)}")


def resolve_config_path(run: Run, host: CodeHost, base: str, config_path: str | None,
                        linked: list[str] | None = None) -> str:
    """Which repository file the apply edits (see module docstring, step 2)."""
    if config_path:
        return safe_repo_path(config_path)
    if linked:
        if len(linked) > 1:
            raise AsapError(f"run {run.id} is linked to several configs in .asap.yml: {', '.join(linked)}",
                            field="config_path", hint="name one with --config PATH (or 'apply N to PATH')")
        return safe_repo_path(linked[0])
    if run.record.config:
        guess = safe_repo_path(run.record.config.rsplit("/", 1)[-1])
        if host.read_file(guess, base) is not None:
            return guess
    raise AsapError(f"cannot tell which config file in {host.name} run {run.id} uses", field="config_path",
                    hint="pass --config PATH, or link it in .asap.yml under runs: {PATH: " + repr(run.id) + "}")


def _linked_configs(host: CodeHost, base: str, run_id: str) -> list[str]:
    from integrations.github.settings import SETTINGS_FILE, parse_settings

    return parse_settings(host.read_file(SETTINGS_FILE, base), f"{host.name}:{SETTINGS_FILE}").configs_for_run(run_id)


def _find_pull(pulls: list[PullRequest], branch: str) -> PullRequest | None:
    return next((p for p in pulls if p.head_branch == branch), None)


def _lock_holder(pulls: list[PullRequest], branch: str, config_path: str) -> PullRequest | None:
    for p in pulls:
        m = MARKER_RE.search(p.body or "")
        if p.head_branch != branch and m and m.group("config") == config_path:
            return p
    return None


def _refuse_partial_or_empty(pset: ProposalSet, proposal: Proposal, index: int, where: str, *, changed: bool) -> None:
    """Refuse a proposal apply cannot make whole: one whose change is partly or wholly in values the recorded launch
    command sets (apply edits files only; the mesh alone is not the change that was predicted), or one the file
    already has."""
    owned = [c for c in proposal.settings_changes if "not written" in c]
    if owned:
        what = "values" if changed else "only what"
        rest = (": committing the rest alone would not be the proposal that was predicted, so nothing is committed"
                if changed else "")
        raise AsapError(f"{where}: proposal {index} changes {what} the run's launch command sets "
                        f"({'; '.join(owned)}){rest}; edit that command (run.yaml command:) — apply edits files only",
                        field="proposal")
    if not changed:
        raise AsapError(f"{where} already has {change_summary(pset, proposal, short=True)}; nothing to apply",
                        field="proposal")


def apply_proposal(
    run_id: str,
    index: int,
    requester: Any,
    host: CodeHost,
    *,
    config_path: str | None = None,
    runs: RunStore | None = None,
    report: AnalysisReport | None = None,
    proposals: ProposalSet | None = None,
) -> ApplyResult:
    """Open (or update) the change request applying proposal ``index`` of ``run_id`` (module docstring)."""
    from bot.analysis.analyze import analyze_run
    from bot.proposals.engine import propose
    from bot.runs.open import open_runs

    if isinstance(index, bool) or not isinstance(index, int) or not 1 <= index <= 20:
        raise AsapError(f"proposal number must be 1..20, got {index!r}", field="proposal")
    run = (runs or open_runs()).get(run_id)
    report = report or analyze_run(run)
    pset = proposals or propose(run, report)
    proposal = pick_proposal(pset, index)
    base = host.default_branch()
    path = resolve_config_path(run, host, base, config_path,
                               None if config_path else _linked_configs(host, base, run.id))
    branch = branch_name(run.id, index)

    pulls = host.open_pulls()
    holder = _lock_holder(pulls, branch, path)
    if holder is not None:
        return ApplyResult(url=holder.url, branch=holder.head_branch, created=False, status="locked",
                           pull_number=holder.number, config_path=path,
                           message=f"an apply for {path} is already open: {holder.url} ({holder.title}); "
                                   "merge or close it before applying another proposal to the same config")
    existing = _find_pull(pulls, branch)
    head = host.branch_head(branch)
    if head is not None and not head.written_by(host.bot):
        url = existing.url if existing else branch
        return ApplyResult(url=url, branch=branch, created=False, status="human_push",
                           pull_number=existing.number if existing else None, config_path=path,
                           commit_sha=head.sha,
                           message=f"someone else pushed to {branch} (head {head.sha[:10]} by {head.author_email}); "
                                   "ASAP no longer rewrites this branch — edit it by hand or delete it to re-apply")

    text = host.read_file(path, base)
    if text is None:
        raise ConfigError(f"no file {path} on {base} in {host.name}", source=path, field="config_path")
    # read as the run's launch resolves it: run.yaml's command: overrides win over the file (and are not edited)
    cfg = for_run(parse_config(text, path, command=run.record.command), run.record)
    check_target_matches_run(cfg, run, pset, path)
    mesh = Mesh(ici=proposal.mesh.get("ici", {}), dcn=proposal.mesh.get("dcn", {}))  # type: ignore[arg-type]
    new_text = apply_changes(cfg, mesh, dict(proposal.settings))
    _refuse_record(cfg, text, new_text, path, index)
    _refuse_partial_or_empty(pset, proposal, index, f"{path} on {base}", changed=new_text != text)
    diff = diff_text(text, new_text, path)
    title = f"ASAP: {change_summary(pset, proposal, short=True)} in {path} (run {run.id}, proposal {index})"
    message = (f"asap: apply proposal {index} of run {run.id} to {path}\n\n"
               + "".join(f"{line}\n" for line in change_lines(pset, proposal))
               + f"\n{scope_sentence(pset, proposal)}\n\nAsap-Run: {run.id}\nAsap-Proposal: {index}\n")
    commit = host.commit_file(branch, base, path, new_text, message)
    body = render_pr_body(run.id, index, path, report, pset, proposal, requester, diff)
    if existing is not None:
        pull = host.update_pull(existing, title, body)
        status = "updated" if commit.changed else "unchanged"
        verb = "updated" if commit.changed else "is up to date:"
        return ApplyResult(url=pull.url, branch=branch, created=False, status=status, pull_number=pull.number,
                           config_path=path, commit_sha=commit.sha, diff=diff,
                           message=f"proposal {index} of run {run.id} {verb} {pull.url}")
    pull = host.create_pull(branch, base, title, body)
    return ApplyResult(url=pull.url, branch=branch, created=True, status="created", pull_number=pull.number,
                       config_path=path, commit_sha=commit.sha, diff=diff,
                       message=f"opened {pull.url} applying proposal {index} of run {run.id} "
                               f"({change_summary(pset, proposal)}) to {path}")


def _refuse_record(cfg: Any, text: str, new_text: str, path: str, index: int) -> None:
    """A torchtitan JSON record is written by the run, not read by it: a pull request editing it changes nothing,
    so apply names the assignments to make in the config function instead."""
    from bot.configs.torchtitan_json import changed_assignments, is_record

    if is_record(cfg):
        raise AsapError(f"{path} is torchtitan's record of the run's config function, which torchtitan does not read "
                        f"back: a pull request editing it would change nothing. Make proposal {index} in the function "
                        f"that builds the Trainer.Config: {changed_assignments(text, new_text) or 'no change'}",
                        field="config_path")


SCHEDULE_SETTINGS = frozenset({"steps", "train_iters", "max_steps", "learning_rate", "lr", "checkpoint_period",
                               "save_interval", "log_interval", "eval_interval", "run_name", "seed"})
"""Settings that say how long or how a run trains, not its shape: a repo file may differ in them."""


def _mesh(raw: dict[str, Any]) -> Mesh:
    return Mesh(ici=raw.get("ici", {}), dcn=raw.get("dcn", {})).normalized()


def _run_config(run: Run) -> ShardingConfig | None:
    """The run's own sharding config (what it was measured with), or None when it has none or it cannot be read."""
    if not run.record.config:
        return None
    try:
        return for_run(load_config(run.path(run.record.config, field="config"), command=run.record.command),
                       run.record)
    except AsapError:
        return None


def check_target_matches_run(cfg: ShardingConfig, run: Run, pset: ProposalSet, path: str) -> None:
    """Refuse to edit a file that is not this run's config (a different chip count, mesh or settings).

    The file may be the run's config as measured, or that config with one of this run's proposals already
    applied (its mesh or settings values then equal a proposal's). Anything else means the proposal was
    computed for another configuration, and committing it would produce a config nobody predicted.
    """
    rec = run.record
    run_cfg = _run_config(run)
    theirs = f"run {run.id}'s config ({rec.config})" if rec.config else f"run {run.id}"
    hint = (f"pass --config PATH naming the file run {run.id} was launched with "
            f"({rec.num_chips} chips, mesh {pset.baseline.mesh_short})")
    try:
        file_mesh = cfg.mesh(rec.num_chips, rec.num_slices).normalized()
    except ConfigError as exc:
        raise AsapError(f"{path} is not {theirs}: its mesh does not fit the run's {rec.num_chips} chips "
                        f"({exc.message}); {theirs} has mesh {pset.baseline.mesh_short}",
                        source=path, field="config_path", hint=hint) from None
    problems = []
    known = [_mesh(pset.baseline.mesh)] + [_mesh(p.mesh) for p in pset.proposals]
    if file_mesh not in known:
        problems.append(f"mesh {file_mesh.short()} in {path}, {pset.baseline.mesh_short} in {theirs}")
    for key, run_value in (run_cfg.settings.items() if run_cfg is not None else ()):
        name = str(key).rsplit(".", 1)[-1]
        file_value = cfg.setting(name)
        if name in SCHEDULE_SETTINGS or file_value is None or str(file_value) == str(run_value):
            continue
        proposed = {str(v) for p in pset.proposals for k, v in p.settings.items() if str(k).rsplit(".", 1)[-1] == name}
        if str(file_value) not in proposed:
            problems.append(f"{name} {fmt_value(file_value)} in {path}, {fmt_value(run_value)} in {theirs}")
    if problems:
        raise AsapError(f"{path} does not match {theirs}, so run {run.id}'s proposal cannot be applied to it: "
                        + "; ".join(problems), source=path, field="config_path", hint=hint)


def fmt_value(value: object) -> str:
    return brief(value) if isinstance(value, str) else str(value)


def mesh_changes(pset: ProposalSet, proposal: Proposal) -> bool:
    """Whether the proposal's mesh differs from the run's (a settings-only proposal keeps the mesh)."""
    return proposal.mesh != pset.baseline.mesh


def setting_keys(proposal: Proposal) -> list[str]:
    """The config keys (last part of a dotted path) the proposal's settings edit, in order."""
    return [str(path).rsplit(".", 1)[-1] for path in proposal.settings]


def change_lines(pset: ProposalSet, proposal: Proposal) -> list[str]:
    """The proposal's changes in words, one per line: the mesh (when it changes), then each setting."""
    lines = []
    if mesh_changes(pset, proposal):
        lines.append(f"Mesh {pset.baseline.mesh_short} -> {proposal.mesh_short} ({proposal.kind}).")
    described = list(proposal.settings_changes) or [f"{k} -> {v}" for k, v in proposal.settings.items()]
    lines += [f"Setting {text}." for text in described]
    return lines or [f"Mesh {proposal.mesh_short} ({proposal.kind})."]


def change_summary(pset: ProposalSet, proposal: Proposal, *, short: bool = False) -> str:
    """One phrase for replies: ``fsdp=64 -> data=2 fsdp=32`` and/or ``remat_policy full -> minimal``.

    ``short`` gives ``key=value`` for settings and the new mesh alone (pull request titles).
    """
    parts = []
    if mesh_changes(pset, proposal) or not proposal.settings:
        parts.append(proposal.mesh_short if short else f"{pset.baseline.mesh_short} -> {proposal.mesh_short}")
    if short:
        parts += [f"{str(path).rsplit('.', 1)[-1]}={value}" for path, value in proposal.settings.items()]
    else:
        parts += list(proposal.settings_changes) or [f"{k} -> {v}" for k, v in proposal.settings.items()]
    return ", ".join(parts)


def scope_sentence(pset: ProposalSet, proposal: Proposal) -> str:
    """What the commit may touch, said in the commit message and the PR body (the apply rule)."""
    what = ["the mesh lines"] if mesh_changes(pset, proposal) or not proposal.settings else []
    what += [f"`{k}`" for k in setting_keys(proposal)]
    listed = what[0] if len(what) == 1 else ", ".join(what[:-1]) + " and " + what[-1]
    return f"Only the lines this proposal changes are edited ({listed}); every other byte of the file is kept."


def impact_lines(pset: ProposalSet, proposal: Proposal) -> list[str]:
    """Predicted step time and memory per chip, as markdown bullets (PR body, GitHub explain).

    A model-unknown run has no baseline prediction: its proposals are predicted relative to the measured
    step (basis ``profile``) and memory per chip cannot be computed, which is said instead of a fit verdict.
    """
    c, pred, base_pred = proposal.change, proposal.predicted, pset.baseline.predicted
    missing = ", ".join(pset.missing_info) or "model shape"
    if pred is None:
        return [f"- no prediction: the run's model is unknown (missing: {missing})"]
    if base_pred is not None:
        before = f"{base_pred.step_time_ms:.1f}"
    elif pset.baseline.measured_step_ms is not None:
        before = f"{pset.baseline.measured_step_ms:.1f} (measured)"
    else:
        before = "?"
    speed = f", x{c.speedup:.2f}" if c.speedup else ""
    out = [f"- step time {before} -> {pred.step_time_ms:.1f} ms ({pct_text(c.step_time_percent)}{speed}; "
           f"band {pred.step_time_low_ms:.1f}-{pred.step_time_high_ms:.1f} ms)"
           + (" — within the model's noise" if c.within_noise else "")]
    if pred.memory_per_chip_bytes is None or pred.fits_memory is None:
        out.append(f"- memory per chip not computed: the model shape is unknown (missing: {missing})")
    else:
        out.append(f"- memory per chip {gb_text(base_pred.memory_per_chip_bytes if base_pred else None)} -> "
                   f"{gb_text(pred.memory_per_chip_bytes)} of {gb_text(pred.memory_capacity_bytes)} "
                   f"({'fits' if pred.fits_memory else 'DOES NOT FIT'})")
    if pred.basis == "profile":
        out.append("- predicted relative to the measured profile (the model is unknown), so the band is wide")
    return out


pct_text = fmt.signed_pct
gb_text = fmt.gb


def render_pr_body(run_id: str, index: int, path: str, report: AnalysisReport, pset: ProposalSet,
                   proposal: Proposal, requester: Any, diff: str) -> str:
    """The change request's description: predicted impact first (what a reviewer decides on), then diagnosis,
    proposal, confidence, citations and the diff. Text ASAP did not write (past PR titles in citations, the
    config's own lines in the diff) is made inert for GitHub markdown: no mention notifies, no HTML renders,
    no line closes the diff's fence."""
    from integrations.github.markdown import fenced, plain

    d = report.diagnosis
    lines = [marker(run_id, index, path), f"## Apply ASAP proposal {index} of run {run_id} to `{path}`", ""]
    c = proposal.change
    lines.append("**Predicted impact**")  # first: what a reviewer decides on
    lines += impact_lines(pset, proposal)
    if abs(c.tokens_per_step_factor - 1.0) > 1e-9:
        lines.append(f"- tokens per step x{c.tokens_per_step_factor:.2f} (the global batch changes): time per token "
                     f"{pct_text(c.time_per_token_percent)}")
    if proposal.labels:
        lines.append(f"- labels: {', '.join(proposal.labels)}")
    lines += ["", f"**Diagnosis** ({d.bottleneck}-bound, confidence {d.confidence:.2f}): {plain(d.summary)}", ""]
    lines += [f"**Proposal {index}** ({proposal.kind}, from {proposal.origin}):"]
    if mesh_changes(pset, proposal):
        lines.append(f"- mesh `{pset.baseline.mesh_short}` -> `{proposal.mesh_short}`")
    else:
        lines.append(f"- mesh unchanged: `{proposal.mesh_short}`")
    described = list(proposal.settings_changes) or [f"{k} -> {v}" for k, v in proposal.settings.items()]
    lines += [f"- setting `{text}`" for text in described]
    lines += ["", plain(proposal.rationale), "", scope_sentence(pset, proposal)]
    lines += ["", f"**Confidence**: {proposal.confidence:.2f}"]
    lines += [f"- {plain(r)}" for r in proposal.confidence_reasons]
    if proposal.tradeoffs:
        lines += ["", "**Trade-offs**"] + [f"- {plain(t)}" for t in proposal.tradeoffs]
    lines += ["", "**Citations**"]
    if proposal.move is not None:
        where = f" (`{proposal.move.citation}`)" if proposal.move.citation else ""
        lines.append(f"- playbook `{proposal.move.id}`{where} — {plain(proposal.move.source)}")
    cited = {proposal.move.citation} if proposal.move is not None else set()
    lines += [f"- {c.kind} `{c.ref}` — {plain(c.title)}: {plain(c.why)}" for c in proposal.citations if c.ref not in cited]
    lines += [f"- advice `{a.id}` — {plain(a.source)}" for a in pset.advice]
    if proposal.move is None and not pset.advice and not proposal.citations:
        lines.append("- mesh search over the calibrated cost model (no playbook rule matched)")
    passed = [ch.name for ch in proposal.critic if ch.passed]
    lines += ["", f"**Checks passed**: {', '.join(passed) or 'none'}"]
    measured = report.kpis.step_time_ms
    lines += ["", f"**Compare against**: run `{run_id}`"
              + (f" (measured {measured:.1f} ms/step)" if measured else "")
              + ". Launch the merged config and compare its step time with this run's; put "
              f"`derived_from: {{run: \"{run_id}\", proposal: {index}}}` in the new run's run.yaml, then "
              "`asap record-outcome <new run>` records the outcome (predicted vs measured) and later proposals cite it."]
    who = getattr(requester, "display", None) or getattr(requester, "user_id", None)
    src = getattr(requester, "source", None)
    if who:
        if src != "github":  # a Slack or CLI name is not a GitHub login: quoted, it notifies nobody there
            who = "`" + str(who).replace("`", "'") + "`"
        lines += ["", f"Requested by {who}" + (f" via {src}" if src else "") + "."]
    lines += ["", "<details><summary>Diff</summary>", "", fenced(diff, "diff"), "", "</details>"]
    return "\n".join(lines) + "\n"
