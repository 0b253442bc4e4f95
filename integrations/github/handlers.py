"""Job handlers for GitHub (registered on import): mention answers, apply, and the PR auto-review.

Every request gets ONE reply comment, keyed by the comment it answers (``<!-- asap:reply=<repo>#<n>/comment/
<id> sig=<hmac> -->``, signed with the server secret, see :mod:`integrations.github.markdown`) and edited in
place: a retried or redelivered job never posts twice, and an edited comment (``issue_comment.edited``)
updates the same reply. The handler first upserts a short "working on it" body, then the answer. The
answer to a question is rendered for markdown (:mod:`integrations.github.render`): verdict, proposals table,
then the details folded once. The PR review keeps one comment per PR (``<!-- asap:review=... -->``) and a
check run on the head commit (a commit status where GitHub refuses check runs: :mod:`integrations.github.checkrun`). Replies show repository paths only: the server's runs folder and temporary folders are cut
out of every message. PyGithub is synchronous: each handler does its GitHub work in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import re
import tempfile
from pathlib import Path
from typing import Any

from bot.errors import AsapError, RunNotFound
from bot.runtime.context import RuntimeContext
from bot.runtime.handlers import register_failure_reply, register_handler
from bot.runtime.jobs import Job
from integrations.github import markdown as md
from integrations.github.commands import Command
from integrations.github.config import GitHubIntegration, integration

log = logging.getLogger("asap.github")

MAX_COMMENT = 60000
_review_locks: dict[str, asyncio.Lock] = {}


def reply_marker(gi: GitHubIntegration, job: Job) -> str:
    """The signed marker of this request's one reply: keyed by the comment it answers (edits included)."""
    where = f"{job.reply_to['repo']}#{job.reply_to['number']}"
    cid = job.payload.get("comment_id")
    key = f"{where}/comment/{cid}" if isinstance(cid, int) and not isinstance(cid, bool) else f"{where}/job/{job.id}"
    return md.marker(gi.marker_secret, "reply", key)


def review_marker(gi: GitHubIntegration, repo: str, number: int) -> str:
    """The signed marker of the one review comment on PR ``number``."""
    return md.marker(gi.marker_secret, "review", f"{repo}#{number}")


def scrub_paths(text: str, gi: GitHubIntegration) -> str:
    """Cut server paths out of a message: the runs folder (``<runs>/311/run.yaml`` -> ``311/run.yaml``, the
    folder alone -> "the runs store") and temporary folders (``/tmp/asap-review-x/new/a.yml`` -> ``a.yml``)."""
    from bot.runs.store import DEFAULT_RUNS_DIR

    roots = {str(Path(gi.runs_dir).resolve()) if gi.runs_dir else str(DEFAULT_RUNS_DIR)}
    if gi.runs_dir:
        roots.add(gi.runs_dir.rstrip("/"))
    for root in sorted(roots, key=len, reverse=True):
        text = text.replace(root + "/", "").replace(root, "the runs store")
    tmp = re.escape(tempfile.gettempdir().rstrip("/"))
    text = re.sub(rf"{tmp}/asap-[A-Za-z0-9_.-]+/(?:(?:new|old)/)?", "", text)
    return re.sub(r"(?<![\w.])/tmp/[^\s'\"]*/", "", text)


def _host(gi: GitHubIntegration, job: Job) -> Any:
    return gi.clients.host(str(job.reply_to["repo"]), job.payload.get("installation"))


def _reply(host: Any, gi: GitHubIntegration, job: Job, body: str) -> None:
    mark = reply_marker(gi, job)
    host.upsert_comment(int(job.reply_to["number"]), mark, f"{mark}\n{scrub_paths(body, gi)}"[:MAX_COMMENT])


def _last_run_key(job: Job) -> str:
    return f"{job.thread}:last-run"


def _get_run(gi: GitHubIntegration, run_id: str) -> Any:
    """The run, or an AsapError naming the run as asked and the nearest IDs (no server path)."""
    try:
        return gi.runs().get(run_id)
    except RunNotFound as exc:
        raise RunNotFound(f"no run {run_id!r} is known to ASAP", field="run", hint=exc.hint) from None


def _resolve_run(ctx: RuntimeContext, gi: GitHubIntegration, job: Job, cmd: Command) -> str:
    """The run the command is about: named in it, else the last run discussed on this PR/issue."""
    if cmd.run:
        run = _get_run(gi, cmd.run).id  # the nearest IDs come as the hint
    else:
        doc = ctx.store.get_thread(_last_run_key(job)) or {}
        run = doc.get("run")
        if not run:
            from agents.intents import find_run_id

            found = find_run_id(cmd.text, gi.runs().list_ids())
            if found is None:
                raise AsapError(f"which run? name it, e.g. `@{gi.mention} why is run 123 slow?` or "
                                f"`@{gi.mention} apply 2 of run 123`", field="run")
            run = _get_run(gi, found).id
    ctx.store.put_thread(_last_run_key(job), {"run": run})
    return str(run)


def refusal(cmd: Command, verb: str) -> str:
    """The reply to a command whose arguments were refused: what was refused, and that nothing happened."""
    return f"Not {verb}: {md.text(cmd.error or 'say which proposal')}. Nothing was changed."


def render_answer(ctx: RuntimeContext, answer: Any, thread_id: str, mention: str) -> str:
    """The markdown reply for a conversation answer: the first answer as verdict + table + one fold."""
    from agents.workspace import Workspace
    from integrations.github.render import render_first, render_followup

    if answer.intent == "first":
        rec = ctx.store.get_thread(thread_id) or {}
        ws = Workspace.from_dict(rec.get("workspace") or {"run_id": answer.run_id})
        if ws.report is not None:
            return render_first(ws, answer, mention)
    return render_followup(answer)


async def github_ask(job: Job, ctx: RuntimeContext) -> None:
    """``@asap why is run 123 slow?`` / ``@asap propose 123`` / follow-ups: the agents' answer as one comment."""
    gi = integration(ctx)
    cmd = Command.from_dict(job.payload.get("command") or {"action": "ask", "text": job.text})
    host = await asyncio.to_thread(_host, gi, job)
    if cmd.error:
        await asyncio.to_thread(_reply, host, gi, job, f"Not answered: {md.text(cmd.error)}.")
        return
    await asyncio.to_thread(_reply, host, gi, job, "⏳ ASAP is looking into it…")
    run = await asyncio.to_thread(_resolve_run, ctx, gi, job, cmd)
    text = cmd.text if cmd.action == "ask" else f"analyze run {run} again: why is it slow, and which meshes?"
    conv = ctx.conversation()
    thread_id = f"{job.thread}:run:{run}"
    answer = await asyncio.to_thread(lambda: asyncio.run(conv.ask(text, thread_id=thread_id, run_id=run)))
    ctx.metrics.record_usage(job.source, job.kind, answer.usage, answer.cost_usd)
    body = await asyncio.to_thread(render_answer, ctx, answer, thread_id, gi.mention)
    await asyncio.to_thread(_reply, host, gi, job, body)


def render_explain(pset: Any, index: int, mention: str = "asap") -> str:
    """Proposal ``index`` in full, from the deterministic engine: predicted impact first, then what changes,
    why, confidence, checks and the diff. ``mention`` is the configured mention word ("apply it with")."""
    from bot.apply import change_summary, impact_lines, pick_proposal

    p = pick_proposal(pset, index)
    lines = [f"**Proposal {index} for run {md.text(pset.run_id)}**: {md.text(change_summary(pset, p))} "
             f"({md.text(p.kind)})", ""]
    lines += impact_lines(pset, p)  # ASAP's own computed sentences (numbers only)
    lines += ["", md.text(p.rationale), ""]
    lines.append(f"- confidence {p.confidence:.2f}: " + "; ".join(md.text(r) for r in p.confidence_reasons))
    lines += [f"- trade-off: {md.text(t)}" for t in p.tradeoffs]
    lines += [f"- check {md.text(c.name)}: {'passed' if c.passed else 'FAILED'} — {md.text(c.reason)}" for c in p.critic]
    if p.move is not None:
        lines.append(f"- playbook {md.code(p.move.id)} — {md.text(p.move.source)}")
    if p.diff:
        lines += ["", "<details><summary>Config diff</summary>", "", md.fenced(p.diff, "diff"), "", "</details>"]
    lines += ["", f"Apply it with `@{mention} apply {index}` (needs write permission)."]
    return "\n".join(lines)


async def github_explain(job: Job, ctx: RuntimeContext) -> None:
    """``@asap explain 2``: the computed explanation of proposal 2 of the PR's run."""
    gi = integration(ctx)
    cmd = Command.from_dict(job.payload.get("command") or {"action": "explain", "text": job.text})
    host = await asyncio.to_thread(_host, gi, job)
    if cmd.error or cmd.index is None:
        await asyncio.to_thread(_reply, host, gi, job, refusal(cmd, "done"))
        return

    def work() -> str:
        from bot.analysis.analyze import analyze_run
        from bot.proposals.engine import propose

        run = _get_run(gi, _resolve_run(ctx, gi, job, cmd))
        return render_explain(propose(run, analyze_run(run)), cmd.index, gi.mention)  # type: ignore[arg-type]

    await asyncio.to_thread(_reply, host, gi, job, "⏳ ASAP is looking into it…")
    body = await asyncio.to_thread(work)
    await asyncio.to_thread(_reply, host, gi, job, body)


def _race_lost(host: Any, exc: Any, cmd: Command) -> str:
    """Another apply created the same branch a moment earlier: that apply won; answer with its PR."""
    pull = host.wait_for_pull(exc.branch)
    if pull is None:
        return (f"🔁 Another apply of proposal {cmd.index} is writing {md.code(exc.branch)} at this moment; "
                "its pull request is not open yet. Nothing more was changed here.")
    return (f"🔁 Another apply of proposal {cmd.index} got there first: {pull.url} "
            f"({md.plain(pull.title)}). This request changed nothing more.")


def apply_for_job(ctx: RuntimeContext, gi: GitHubIntegration, job: Job, host: Any) -> str:
    """Authorize, then apply; returns the reply body. Synchronous (runs in a worker thread)."""
    from bot.apply import apply_proposal
    from bot.auth import ApplyPolicy
    from integrations.codehost.github import ApplyRaceLost
    from integrations.github.settings import SETTINGS_FILE, parse_settings

    cmd = Command.from_dict(job.payload.get("command") or {"action": "apply", "text": job.text})
    if cmd.error or cmd.index is None:
        if cmd.index is None and not cmd.error:
            cmd = Command(action="apply", text=cmd.text, error=f"say which proposal, e.g. `@{gi.mention} apply 2`")
        return refusal(cmd, "applied")
    try:
        settings = parse_settings(host.read_file(SETTINGS_FILE, host.default_branch()), SETTINGS_FILE)
        teams: list[str] = settings.apply.teams
    except AsapError as exc:
        teams = []
        log.warning("ignoring invalid %s for apply teams: %s", SETTINGS_FILE, exc.message)
    decision = ApplyPolicy(github_teams=gi.apply_teams).check_github(job.requester.user_id, host, teams)
    if not decision.allowed:
        return f"🔒 Not applied: {md.text(decision.reason)}. Nothing was changed."
    run = _resolve_run(ctx, gi, job, cmd)
    try:
        result = apply_proposal(run, cmd.index, job.requester, host, config_path=cmd.config_path, runs=gi.runs())
    except ApplyRaceLost as exc:
        return _race_lost(host, exc, cmd)
    icon = {"created": "✅", "updated": "🔁", "unchanged": "✅", "locked": "🔒", "human_push": "✋"}.get(result.status, "")
    body = f"{icon} {md.plain(result.message)}"
    if result.diff:
        body += (f"\n\n<details><summary>Diff ({md.text(result.config_path)})</summary>\n\n"
                 f"{md.fenced(result.diff, 'diff')}\n\n</details>")
    return body


async def github_apply(job: Job, ctx: RuntimeContext) -> None:
    """``@asap apply 2``: writers (or listed teams) get a PR on ``asap/<run>-p2``; others a refusal."""
    gi = integration(ctx)
    host = await asyncio.to_thread(_host, gi, job)
    await asyncio.to_thread(_reply, host, gi, job, "⏳ ASAP is checking permissions and preparing the change…")
    body = await asyncio.to_thread(apply_for_job, ctx, gi, job, host)
    await asyncio.to_thread(_reply, host, gi, job, body)


async def github_review(job: Job, ctx: RuntimeContext) -> None:
    """Review the PR's sharding-config changes: one comment updated in place, and a check run (or status)."""
    from integrations.github.checkrun import check_report, publish_verdict
    from integrations.github.review import review_pull

    gi = integration(ctx)
    key = f"{job.reply_to['repo']}#{job.reply_to['number']}"
    lock = _review_locks.setdefault(key, asyncio.Lock())
    async with lock:  # two quick pushes: the second review waits and then sees the newest head
        host = await asyncio.to_thread(_host, gi, job)
        number = int(job.reply_to["number"])
        mark = review_marker(gi, str(job.reply_to["repo"]), number)
        outcome = await asyncio.to_thread(review_pull, host, number, runs=gi.runs(), marker=mark)

        def publish() -> None:
            if not outcome.files and not outcome.settings_error and host.find_comment(number, mark) is None:
                return  # nothing to review and nothing said before: stay quiet
            report = check_report(outcome, lambda text: scrub_paths(text, gi))
            shown = publish_verdict(host, gi, name=outcome.context, head_sha=outcome.head_sha, report=report,
                                    state=outcome.state, description=scrub_paths(outcome.description, gi))
            body = outcome.check_body if shown == "checks" else outcome.body  # its last line names what was set
            host.upsert_comment(number, mark, scrub_paths(body, gi), legacy="<!-- asap:review -->")

        await asyncio.to_thread(publish)


async def post_failure(job: Job, reason: str, ctx: RuntimeContext) -> None:
    """The job's one comment says it failed and why (also used for rate-limit refusals)."""
    gi = integration(ctx)
    said = md.lines(scrub_paths(reason, gi))

    def work() -> None:
        host = _host(gi, job)
        if job.kind == "review":
            number = int(job.reply_to["number"])
            mark = review_marker(gi, str(job.reply_to["repo"]), number)
            host.upsert_comment(number, mark, f"{mark}\n### ASAP sharding review\n\n❌ The review could not run: {said}\n")
            if job.payload.get("head_sha"):  # a check run: neutral "could not review" (status fallback: error)
                from integrations.github.checkrun import crash_report, publish_verdict

                publish_verdict(host, gi, name="asap/sharding-review", head_sha=str(job.payload["head_sha"]),
                                report=crash_report(scrub_paths(reason, gi)), state="error",
                                description=scrub_paths(reason, gi)[:140])
            return
        _reply(host, gi, job, f"⚠️ {said}")

    await asyncio.to_thread(work)


register_handler("github", "ask", github_ask)
register_handler("github", "explain", github_explain)
register_handler("github", "apply", github_apply)
register_handler("github", "review", github_review)
register_failure_reply("github", post_failure)
