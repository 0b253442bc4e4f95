"""The pull-request auto-review of sharding-config changes: ONE comment per PR, plus a verdict on the head commit.

For each changed file matching the repository's globs (``.asap.yml`` from the DEFAULT branch), the base
and head versions are parsed with the config parsers and compared with :func:`bot.proposals.review.review`
(step time and memory per chip before/after, Critic checks, moves that contradict the diagnosis),
calibrated on the run linked to that config: ``.asap.yml`` ``runs:`` first, else a ``run: <id>`` / ``asap-run:
<id>`` line in the PR body. Without a run, the chip count comes from ``.asap.yml`` ``chips:`` for that path;
a NEW file with neither cannot have its mesh product checked (the file would only be checked against itself),
so it is reported as "chip count unknown": a ``neutral`` check run with that reason (a ``pending`` commit
status where check runs are refused: commit statuses have no neutral state, and ``success`` would claim a
check that did not happen). The verdict (check run, or the commit status fallback) is shown by
:mod:`integrations.github.checkrun`. Files that are not
sharding configs are skipped quietly. The comment carries a signed ``<!-- asap:review=... -->`` marker and is
edited in place on every push; the status on the head commit is ``failure`` when a problem (or, with
``fail_on: warning``, a warning) is flagged. Every path shown is the repository path; every value from the
pull request is escaped for markdown (:mod:`integrations.github.markdown`).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.configs.detect import parse_config
from bot.errors import AsapError, ConfigError
from integrations.github import markdown as md
from integrations.github.settings import MAX_REVIEWED_FILES, SETTINGS_FILE, ChipCount, RepoSettings, parse_settings

REVIEW_MARKER = "<!-- asap:review="  # every review comment starts with it; the full marker is signed (handlers)
BODY_RUN_RE = re.compile(r"(?im)^\s*(?:asap[-_ ]?)?run\s*[:=]\s*#?([A-Za-z0-9][A-Za-z0-9._-]{0,63})\s*$")
ICON = {"problem": "❌", "pre-existing": "🔸", "warning": "⚠️", "unchecked": "❔", "info": "ℹ️"}


@dataclass
class FileReview:
    path: str
    run_id: str | None
    result: Any | None = None  # ReviewResult
    error: str | None = None
    note: str | None = None
    unchecked: str | None = None  # why the mesh could not be checked at all (chip count unknown)
    chips: ChipCount | None = None  # declared in .asap.yml and used
    changed_lines: list[int] = field(default_factory=list)  # lines of the new file's mesh keys the change sets
    first_key_line: int | None = None  # the new file's first mesh key (where a finding without a changed line goes)
    more: int = 0  # > 0: this entry stands for that many matching files NOT reviewed (the file cap)

    @property
    def severity(self) -> str:
        if self.error:
            return "problem"
        if self.unchecked:
            return "unchecked"
        if self.result is None:
            return "info"
        sev = {f.severity for f in self.result.findings}
        return "problem" if "problem" in sev else "warning" if "warning" in sev else "info"


@dataclass
class ReviewOutcome:
    files: list[FileReview] = field(default_factory=list)
    settings_error: str | None = None
    head_sha: str = ""
    state: str = "success"
    description: str = ""
    body: str = ""  # the comment, its last line naming the commit status
    check_body: str = ""  # the same comment, its last line naming the check run's conclusion
    context: str = "asap/sharding-review"
    marker: str = REVIEW_MARKER + "unsigned -->"
    enabled: bool = True  # .asap.yml review.enabled
    fail_on: str = "problem"  # .asap.yml review.fail_on


def _not_a_sharding_config(text: str | None, path: str) -> bool:
    if text is None:
        return True
    try:
        parse_config(text, path)
    except ConfigError as exc:
        return ("no sharding keys" in exc.message or "expected a YAML mapping" in exc.message or "empty" in exc.message
                or "no training launch found" in exc.message  # a shell script that launches no training
                or "does not read it as a config" in exc.message)  # an Accelerate / mcli run config: not ASAP's to review
    return False


def run_from_body(body: str) -> str | None:
    m = BODY_RUN_RE.search(body or "")
    return m.group(1) if m else None


def review_pull(host: Any, number: int, *, runs: Any, marker: str | None = None) -> ReviewOutcome:
    """Review PR ``number`` on ``host`` (a GitHubHost); returns the comment body and the status to set.

    ``marker`` is the comment's signed first line (:func:`integrations.github.handlers.review_marker`).
    """
    pr = host.pull_info(number)
    out = ReviewOutcome(head_sha=pr.head_sha)
    if marker:
        out.marker = marker
    base_branch = host.default_branch()
    try:
        settings = parse_settings(host.read_file(SETTINGS_FILE, base_branch), f"{SETTINGS_FILE} on {base_branch}")
    except AsapError as exc:
        out.settings_error = exc.render()
        settings = RepoSettings()
    out.context = settings.review.status_context
    out.enabled, out.fail_on = settings.review.enabled, settings.review.fail_on
    if not settings.review.enabled:
        out.state, out.description = "success", "ASAP review is off for this repository (.asap.yml)"
        return _finish(out, settings)
    body_run = run_from_body(pr.body)
    changed = [f for f in host.pull_files(number) if f.status != "removed" and settings.matches(f.path)]
    skipped_count = max(0, len(changed) - MAX_REVIEWED_FILES)
    for f in changed[:MAX_REVIEWED_FILES]:
        after = host.read_file(f.path, pr.head_sha)
        before = host.read_file(f.previous_path or f.path, pr.base_sha) if f.status != "added" else None
        if _not_a_sharding_config(after, f.path) and _not_a_sharding_config(before, f.path):
            continue
        run_id = settings.run_for(f.path) or body_run
        fr = _review_file(f.path, before, after, run_id, runs, settings.chips_for(f.path))
        fr.changed_lines, fr.first_key_line = _key_lines(before, after, f.path)
        out.files.append(fr)
    if skipped_count:
        out.files.append(FileReview(path=f"({skipped_count} more files)", run_id=None, more=skipped_count,
                                    note=f"only the first {MAX_REVIEWED_FILES} matching files are reviewed"))
    return _finish(out, settings)


def _key_lines(before: str | None, after: str | None, path: str) -> tuple[list[int], int | None]:
    """(lines of the new file's own mesh keys whose value differs from the base's — every key of a new file —,
    the line of its first own mesh key); keys read from another file (a base_config) have no line here."""
    try:
        own = [k for k in parse_config(after or "", path).keys if k.file is None]
    except ConfigError:
        return [], None
    old: dict[str, str] = {}
    if before is not None:
        try:
            old = {k.path: k.raw for k in parse_config(before, path).keys if k.file is None}
        except ConfigError:
            old = {}
    changed = sorted({k.line for k in own if old.get(k.path) != k.raw})
    return changed, (min(k.line for k in own) if own else None)


def _review_file(path: str, before: str | None, after: str | None, run_id: str | None, runs: Any,
                 chips: ChipCount | None = None) -> FileReview:
    """One file's review. The chip count: the linked run's, else ``.asap.yml`` ``chips:``, else (a changed
    file) what the base version spells out; a new file with none of these is "chip count unknown"."""
    fr = FileReview(path=path, run_id=run_id)
    run = None
    if run_id:
        try:
            run = runs.get(run_id)
        except AsapError as exc:
            fr.note = f"linked run {run_id!r} could not be loaded ({exc.message}); reviewed without it"
    if run is None and before is None and chips is None:
        fr.unchecked = (f"chip count unknown: no run is linked to this new file and {SETTINGS_FILE} declares no "
                        "chips for it, so its mesh product cannot be checked (a new file checked against itself "
                        f"always passes). Declare it in {SETTINGS_FILE} on the default branch (chips: {{{path}: N}}) "
                        "or link a run (runs: {PATH: RUN}, or 'run: RUN' in the PR description)")
        return fr
    fr.chips = chips if run is None else None
    with tempfile.TemporaryDirectory(prefix="asap-review-") as tmp:
        _run_review(fr, tmp, before, after, run, chips)
    return fr


def _run_review(fr: FileReview, tmp: str, before: str | None, after: str | None, run: Any,
                chips: ChipCount | None) -> None:
    """Write both sides to ``tmp`` and review them; every message names the repository path only."""
    from bot.proposals.review import review

    name = Path(fr.path).name
    new_p, old_p = Path(tmp, "new", name), Path(tmp, "old", name)
    new_p.parent.mkdir()
    old_p.parent.mkdir()
    new_p.write_text(after or "", encoding="utf-8")
    old_p.write_text(before if before is not None else (after or ""), encoding="utf-8")
    where = {str(new_p): fr.path, str(old_p): f"{fr.path} (base)" if before is not None else fr.path, tmp: ""}

    def repo_paths(text: str) -> str:
        for server, shown in where.items():
            text = text.replace(server, shown)
        return text

    try:
        kw = {"num_chips": chips.chips, "num_slices": chips.slices} if run is None and chips else {}
        fr.result = review(old_p, new_p, run=run, **kw)
    except AsapError as exc:
        msg = repo_paths(exc.render())
        if "how many chips" in exc.message:
            fr.unchecked = (f"{msg} — link the run that measures this config in {SETTINGS_FILE} "
                            f"(runs: {{{fr.path}: RUN}}), declare its chips (chips: {{{fr.path}: N}}) "
                            "or add 'run: RUN' to the PR description")
        elif before is None and chips is not None:
            fr.error = f"the mesh does not fit the {chips.chips} chips declared in {SETTINGS_FILE}: {msg}"
        else:
            fr.error = msg
        return
    for finding in fr.result.findings:
        finding.message = repo_paths(finding.message)
    fr.result.skipped = [repo_paths(x) for x in fr.result.skipped]
    if before is None:
        fr.note = (fr.note + "; " if fr.note else "") + "new file: its mesh is checked on its own" + (
            f" against the {chips.chips} chips declared in {SETTINGS_FILE}" if chips and run is None else "")


def _fmt_pred(side: Any) -> str:
    p = side.predicted
    if p is None:
        return "n/a"
    return f"{p.step_time_ms:.1f} ms/step, {p.memory_per_chip_bytes / 1e9:.1f} GB/chip"


def _status(out: ReviewOutcome, settings: RepoSettings) -> None:
    """The commit status: error (bad settings) > failure (problems) > pending (a file could not be checked:
    no neutral state exists for commit statuses) > success."""
    fail_on = {"problem"} if settings.review.fail_on == "problem" else {"problem", "warning"}
    bad = [f for f in out.files if f.severity in fail_on]
    unchecked = [f for f in out.files if f.severity == "unchecked"]
    if out.settings_error:
        out.state, out.description = "error", f"{SETTINGS_FILE} on the default branch is invalid"
    elif bad:
        out.state = "failure"
        out.description = f"{len(bad)} sharding config(s) with {'problems' if fail_on == {'problem'} else 'problems or warnings'}"
    elif unchecked:
        out.state = "pending"
        out.description = (f"not checked: chip count unknown for {len(unchecked)} config(s); "
                           f"declare chips in {SETTINGS_FILE} or link a run")
    elif out.files:
        out.state, out.description = "success", f"{len(out.files)} sharding config change(s) reviewed"
    else:
        out.state, out.description = "success", "no sharding config changed"


def _finish(out: ReviewOutcome, settings: RepoSettings) -> ReviewOutcome:
    _status(out, settings)
    lines = [out.marker, f"### ASAP sharding review — {md.code(out.head_sha[:10])}", ""]
    if out.settings_error:
        lines += [f"❌ `{SETTINGS_FILE}` on the default branch is invalid, defaults used: {md.text(out.settings_error)}", ""]
    if not out.files:
        lines.append("No sharding config changed in this pull request.")
    for f in out.files:
        lines += _file_section(f)
    from integrations.github.checkrun import verdict

    conclusion, reason = verdict(out)
    tail = f"Settings from `{SETTINGS_FILE}` on the default branch. Updated on every push.</sub>"
    out.body = "\n".join(lines + ["", f"<sub>Status {md.code(out.context)}: {out.state} — "
                                       f"{md.plain(out.description)}. {tail}"]) + "\n"
    out.check_body = "\n".join(lines + ["", f"<sub>Check {md.code(out.context)}: {conclusion} — "
                                             f"{md.plain(reason)}. {tail}"]) + "\n"
    return out


def _file_section(f: FileReview) -> list[str]:
    icon = ICON[f.severity]
    linked = f" (run {md.code(f.run_id)})" if f.run_id and f.result and f.result.run_id else ""
    lines = [f"#### {icon} {md.code(f.path)}{linked}"]
    if f.error:
        lines.append(f"- ❌ {md.text(f.error)}")
    if f.unchecked:
        lines.append(f"- ❔ not checked: {md.text(f.unchecked)}")
    r = f.result
    if r is not None:
        lines.append(f"- mesh: {md.code(r.old.mesh_short)} -> {md.code(r.new.mesh_short or 'invalid')}"
                     + (f"; bottleneck of the linked run: **{md.text(r.bottleneck)}**" if r.bottleneck else ""))
        if r.old.predicted is not None or r.new.predicted is not None:
            lines.append(f"- predicted: {_fmt_pred(r.old)} -> {_fmt_pred(r.new)}"
                         + (f" ({r.change.step_time_percent:+.1f}% step time)" if r.change and r.change.step_time_percent is not None else ""))
        order = {"problem": 0, "pre-existing": 1, "warning": 2, "info": 3}
        for finding in sorted(r.findings, key=lambda x: order.get(x.severity, 9)):
            lines.append(f"- {ICON.get(finding.severity, '•')} **{md.text(finding.check)}**: {md.text(finding.message)}")
        if r.skipped:
            lines += ["<details><summary>Not checked</summary>", ""] + [f"- {md.text(s)}" for s in r.skipped] + ["", "</details>"]
    if f.note:
        lines.append(f"- note: {md.text(f.note)}")
    lines.append("")
    return lines
