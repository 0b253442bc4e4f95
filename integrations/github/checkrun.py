"""The PR review's verdict on the head commit: a GitHub check run, or a commit status where that is refused.

A commit status has four states (error, failure, pending, success), so a review that found only problems the
base branch already had, or that could not check a file, had to pick a dishonest one. A check run
(:func:`check_report`) says it plainly:

* ``failure`` — the change introduces a problem (or, with ``.asap.yml`` ``review.fail_on: warning``, a warning);
* ``neutral`` — nothing introduced, but something to say: only pre-existing problems, a file whose chip count is
  unknown, matching files past the review cap, or an invalid ``.asap.yml`` (defaults used); the reason leads
  the summary;
* ``success`` — every changed sharding config was reviewed and nothing was flagged;
* ``skipped`` — the review is off in ``.asap.yml``;
* a crash or time-out of ASAP itself (:func:`crash_report`) is ``neutral`` "could not review": ASAP's own
  failure never blocks a merge.

Findings become annotations on the file's changed mesh-key lines (problem -> failure, warning and pre-existing
-> warning, chip count unknown -> notice), 50 per request as GitHub requires, the rest sent by updates.
Output texts are cut to GitHub's 65535 characters, saying so. :func:`publish_verdict` creates the check run;
a 403 (a personal or OAuth token: "You must authenticate via a GitHub App.", or an App without ``checks:
write``: "Resource not accessible by integration") is remembered for the repository for the life of the
process, logged once, and the commit status (the same inputs as before check runs) is set instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from integrations.github import markdown as md
from integrations.github.settings import MAX_REVIEWED_FILES, SETTINGS_FILE

log = logging.getLogger("asap.github")

MAX_OUTPUT_CHARS = 65535  # GitHub: "Only 65535 characters are allowed" (summary and text each)
ANNOTATIONS_PER_REQUEST = 50  # GitHub: at most 50 annotations per create/update request
MAX_TITLE = 255  # our cap for the output title and annotation titles (kept to one short line)
MAX_ANNOTATION_MESSAGE = 4000  # our cap: an annotation is a pointer; the full message is in the text
LEVEL = {"problem": "failure", "warning": "warning", "pre-existing": "warning"}


@dataclass
class CheckReport:
    """One check run: its conclusion and output (title, markdown summary and text, annotations)."""

    conclusion: str
    title: str
    summary: str
    text: str = ""
    annotations: list[dict[str, Any]] = field(default_factory=list)

    def outputs(self) -> list[dict[str, Any]]:
        """The output of the create request, then of each update: annotations in batches of 50."""
        base = {"title": self.title[:MAX_TITLE], "summary": cut(self.summary), "text": cut(self.text)}
        batches = [self.annotations[i:i + ANNOTATIONS_PER_REQUEST]
                   for i in range(0, len(self.annotations), ANNOTATIONS_PER_REQUEST)] or [[]]
        return [{**base, "annotations": batch} for batch in batches]


def cut(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """``text`` within GitHub's limit; a cut text ends saying it was cut."""
    if len(text) <= limit:
        return text
    note = "\n\n… (cut to GitHub's check-run limit; the PR comment has the whole review)"
    return text[: limit - len(note)] + note


def verdict(out: Any) -> tuple[str, str]:
    """(conclusion, the reason in one line) from the same inputs as the commit status."""
    fail_on = {"problem"} if out.fail_on == "problem" else {"problem", "warning"}
    files = [f for f in out.files if not f.more]
    bad = [f for f in files if f.severity in fail_on]
    if not out.enabled:
        return "skipped", f"ASAP review is off for this repository ({SETTINGS_FILE})"
    if bad:
        what = "problems" if fail_on == {"problem"} else "problems or warnings"
        return "failure", f"this change introduces {what} in {len(bad)} sharding config(s)"
    reasons = []
    if out.settings_error:
        reasons.append(f"{SETTINGS_FILE} on the default branch is invalid; the defaults were used")
    unchecked = [f for f in files if f.severity == "unchecked"]
    if unchecked:
        reasons.append(f"not checked: chip count unknown for {len(unchecked)} config(s); declare chips in "
                       f"{SETTINGS_FILE} or link a run")
    more = sum(f.more for f in out.files)
    if more:
        reasons.append(f"only the first {MAX_REVIEWED_FILES} matching files were reviewed; {more} more were not")
    pre = [f for f in files if f.result is not None and any(x.severity == "pre-existing" for x in f.result.findings)]
    if pre:
        reasons.append(f"{len(pre)} config(s) keep problems that are pre-existing (already on the base branch); "
                       "this change does not introduce them")
    if reasons:
        return "neutral", "; ".join(reasons)
    if files:
        return "success", f"{len(files)} sharding config change(s) reviewed: nothing flagged"
    return "success", "no sharding config changed"


def _file_line(f: Any) -> str:
    counts: dict[str, int] = {}
    for x in (f.result.findings if f.result is not None else []):
        counts[x.severity] = counts.get(x.severity, 0) + 1
    said = ", ".join(f"{n} {sev}" for sev, n in counts.items() if sev != "info")
    if f.error:
        said = "not reviewable: " + md.plain(f.error[:300])
    elif f.unchecked:
        said = "not checked: chip count unknown"
    elif f.more:
        said = md.plain(f.note or "")
    return f"- {md.code(f.path)}: {said or 'nothing flagged'}"


def check_report(out: Any, scrub: Callable[[str], str] = lambda s: s) -> CheckReport:
    """The check run for a :class:`~integrations.github.review.ReviewOutcome` (see module docstring)."""
    conclusion, reason = verdict(out)
    title = {"failure": "Problems introduced", "neutral": "Nothing introduced — see why this is not a pass",
             "success": "No problem found", "skipped": "Review off"}[conclusion]
    lines = [f"**{conclusion}** — {md.plain(scrub(reason))}", ""]
    lines += [scrub(_file_line(f)) for f in out.files]
    lines += ["", f"<sub>Settings from `{SETTINGS_FILE}` on the default branch. The PR comment holds the same "
                  "review; both are updated on every push.</sub>"]
    body = "\n".join(x for x in out.check_body.splitlines() if not x.startswith("<!-- asap:"))
    return CheckReport(conclusion=conclusion, title=f"{title}: {reason}"[:MAX_TITLE], summary="\n".join(lines),
                       text=scrub(body), annotations=_annotations(out, scrub))


def _annotations(out: Any, scrub: Callable[[str], str]) -> list[dict[str, Any]]:
    notes: list[dict[str, Any]] = []
    for f in out.files:
        line = f.changed_lines[0] if f.changed_lines else f.first_key_line
        if f.more or line is None:
            continue  # no line to point at: the summary and the text carry it
        end = f.changed_lines[-1] if f.changed_lines and f.changed_lines[-1] - line <= 20 else line
        items: list[tuple[str, str, str]] = []
        if f.error:
            items.append(("failure", "not reviewable", f.error))
        if f.unchecked:
            items.append(("notice", "not checked", f.unchecked))
        for x in (f.result.findings if f.result is not None else []):
            level = LEVEL.get(x.severity)
            if level == "warning" and x.severity == "warning" and out.fail_on == "warning":
                level = "failure"
            if level:
                items.append((level, f"{x.check} ({x.severity})", x.message))
        for level, title, message in items:
            msg = scrub(message)
            if len(msg) > MAX_ANNOTATION_MESSAGE:
                msg = msg[: MAX_ANNOTATION_MESSAGE - 40] + " … (the PR comment has the rest)"
            notes.append({"path": f.path, "start_line": line, "end_line": end, "annotation_level": level,
                          "title": title[:MAX_TITLE], "message": msg})
    return notes


def crash_report(reason: str) -> CheckReport:
    """ASAP itself failed (a crash, a time-out): neutral, never a failure of the pull request."""
    return CheckReport(conclusion="neutral", title="Could not review: ASAP failed, not this change",
                       summary=f"**neutral** — could not review: {md.plain(reason)}\n\nThis is ASAP's own failure; "
                               "it does not judge the pull request. Push again or ask the ASAP operators.")


def publish_verdict(host: Any, gi: Any, *, name: str, head_sha: str, report: CheckReport, state: str,
                    description: str) -> str:
    """Show the verdict on ``head_sha`` as check run ``name`` (``gi.review_report == "checks"``), else or on a
    refusal as commit status ``name`` (``state``/``description``). Returns "checks" or "status"."""
    from integrations.codehost.github import ChecksRefused

    repo = host.full_name
    if gi.review_report == "checks" and repo not in gi.checks_refused:
        outputs = report.outputs()
        try:
            run_id = host.create_check_run(name, head_sha, report.conclusion, outputs[0])
        except ChecksRefused as exc:
            gi.checks_refused[repo] = exc.said
            log.warning("GitHub refused check runs on %s (%s): the review's verdict on this repository is a commit "
                        "status until ASAP restarts; give the GitHub App the checks: write permission", repo, exc.said)
        else:
            for more in outputs[1:]:
                host.update_check_run(run_id, more)
            return "checks"
    host.set_status(head_sha, state, description, name)
    return "status"
