"""Job handlers for GitHub (registered on import): mention answers, apply, and the PR auto-review.

Every answer is ONE comment per job, found again by its hidden marker ``<!-- asap:job=<job id> -->`` and
edited in place, so a retried or redelivered job never posts twice: the handler first upserts a short
"working on it" body, then the answer. Long answers keep a summary visible and fold the rest into
``<details>``. The PR review keeps one comment per PR (``<!-- asap:review -->``) and a commit status.
PyGithub is synchronous: each handler does its GitHub work in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from bot.errors import AsapError
from bot.runtime.context import RuntimeContext
from bot.runtime.handlers import register_failure_reply, register_handler
from bot.runtime.jobs import Job
from integrations.github.commands import Command
from integrations.github.config import GitHubIntegration, integration

log = logging.getLogger("asap.github")

MAX_COMMENT = 60000
FOLD_AFTER_CHARS = 1200
_review_locks: dict[str, asyncio.Lock] = {}


def job_marker(job_id: str) -> str:
    return f"<!-- asap:job={job_id.replace('--', '-')} -->"


def fold(text: str, summary: str = "Details") -> str:
    """Keep the first paragraph visible; fold the rest into ``<details>`` when the text is long."""
    text = text.strip()
    if len(text) <= FOLD_AFTER_CHARS:
        return text
    head, _, rest = text.partition("\n\n")
    if len(head) > FOLD_AFTER_CHARS:
        head, rest = head[:FOLD_AFTER_CHARS].rsplit(" ", 1)[0] + " …", text
    rest = rest[: MAX_COMMENT - len(head) - 200]
    return f"{head}\n\n<details><summary>{summary}</summary>\n\n{rest}\n\n</details>"


def _host(gi: GitHubIntegration, job: Job) -> Any:
    return gi.clients.host(str(job.reply_to["repo"]), job.payload.get("installation"))


def _reply(host: Any, job: Job, body: str) -> None:
    host.upsert_comment(int(job.reply_to["number"]), job_marker(job.id), f"{job_marker(job.id)}\n{body}"[:MAX_COMMENT])


def _last_run_key(job: Job) -> str:
    return f"{job.thread}:last-run"


def _resolve_run(ctx: RuntimeContext, gi: GitHubIntegration, job: Job, cmd: Command) -> str:
    """The run the command is about: named in it, else the last run discussed on this PR/issue."""
    if cmd.run:
        run = gi.runs().get(cmd.run).id  # RunNotFound lists the nearest IDs
    else:
        doc = ctx.store.get_thread(_last_run_key(job)) or {}
        run = doc.get("run")
        if not run:
            from agents.intents import find_run_id

            found = find_run_id(cmd.text, gi.runs().list_ids())
            if found is None:
                raise AsapError(f"which run? name it, e.g. '@{gi.mention} why is run 123 slow?' or "
                                f"'@{gi.mention} apply 2 of run 123'", field="run")
            run = gi.runs().get(found).id
    ctx.store.put_thread(_last_run_key(job), {"run": run})
    return str(run)


async def github_ask(job: Job, ctx: RuntimeContext) -> None:
    """``@asap why is run 123 slow?`` / ``@asap propose 123`` / follow-ups: the agents' answer as one comment."""
    gi = integration(ctx)
    cmd = Command.from_dict(job.payload.get("command") or {"action": "ask", "text": job.text})
    host = await asyncio.to_thread(_host, gi, job)
    await asyncio.to_thread(_reply, host, job, "⏳ ASAP is looking into it…")
    run = await asyncio.to_thread(_resolve_run, ctx, gi, job, cmd)
    text = cmd.text if cmd.action == "ask" else f"analyze run {run} again: why is it slow, and which meshes?"
    conv = ctx.conversation()
    answer = await asyncio.to_thread(
        lambda: asyncio.run(conv.ask(text, thread_id=f"{job.thread}:run:{run}", run_id=run)))
    ctx.metrics.record_usage(job.source, job.kind, answer.usage, answer.cost_usd)
    await asyncio.to_thread(_reply, host, job, fold(answer.text, "Full analysis"))


def render_explain(pset: Any, index: int, mention: str = "asap") -> str:
    """Proposal ``index`` in full, from the deterministic engine: what changes, why, numbers, checks, diff.

    ``mention`` is the configured mention word, used in the "apply it with" line.
    """
    from bot.apply import change_summary, impact_lines, pick_proposal

    p = pick_proposal(pset, index)
    lines = [f"**Proposal {index} for run {pset.run_id}**: {change_summary(pset, p)} ({p.kind})",
             "", p.rationale, ""]
    lines += impact_lines(pset, p)
    lines.append(f"- confidence {p.confidence:.2f}: " + "; ".join(p.confidence_reasons))
    lines += [f"- trade-off: {t}" for t in p.tradeoffs]
    lines += [f"- check {c.name}: {'passed' if c.passed else 'FAILED'} — {c.reason}" for c in p.critic]
    if p.move is not None:
        lines.append(f"- playbook `{p.move.id}` — {p.move.source}")
    if p.diff:
        lines += ["", "<details><summary>Config diff</summary>", "", "```diff", p.diff.rstrip("\n"), "```", "", "</details>"]
    lines += ["", f"Apply it with `@{mention} apply {index}` (needs write permission)."]
    return "\n".join(lines)


async def github_explain(job: Job, ctx: RuntimeContext) -> None:
    """``@asap explain 2``: the computed explanation of proposal 2 of the PR's run."""
    gi = integration(ctx)
    cmd = Command.from_dict(job.payload.get("command") or {"action": "explain", "text": job.text})
    host = await asyncio.to_thread(_host, gi, job)
    if cmd.error or cmd.index is None:
        await asyncio.to_thread(_reply, host, job, f"Not done: {cmd.error or 'say which proposal'}.")
        return

    def work() -> str:
        from bot.analysis.analyze import analyze_run
        from bot.proposals.engine import propose

        run = gi.runs().get(_resolve_run(ctx, gi, job, cmd))
        return render_explain(propose(run, analyze_run(run)), cmd.index, gi.mention)  # type: ignore[arg-type]

    await asyncio.to_thread(_reply, host, job, "⏳ ASAP is looking into it…")
    body = await asyncio.to_thread(work)
    await asyncio.to_thread(_reply, host, job, body)


def apply_for_job(ctx: RuntimeContext, gi: GitHubIntegration, job: Job, host: Any) -> str:
    """Authorize, then apply; returns the reply body. Synchronous (runs in a worker thread)."""
    from bot.apply import apply_proposal
    from bot.auth import ApplyPolicy
    from integrations.github.settings import SETTINGS_FILE, parse_settings

    cmd = Command.from_dict(job.payload.get("command") or {"action": "apply", "text": job.text})
    if cmd.error or cmd.index is None:
        return f"Not applied: {cmd.error or f'say which proposal, e.g. @{gi.mention} apply 2'}. Nothing was changed."
    try:
        settings = parse_settings(host.read_file(SETTINGS_FILE, host.default_branch()), SETTINGS_FILE)
        teams: list[str] = settings.apply.teams
    except AsapError as exc:
        teams = []
        log.warning("ignoring invalid %s for apply teams: %s", SETTINGS_FILE, exc.message)
    decision = ApplyPolicy(github_teams=gi.apply_teams).check_github(job.requester.user_id, host, teams)
    if not decision.allowed:
        return f"🔒 Not applied: {decision.reason}. Nothing was changed."
    run = _resolve_run(ctx, gi, job, cmd)
    result = apply_proposal(run, cmd.index, job.requester, host, config_path=cmd.config_path, runs=gi.runs())
    icon = {"created": "✅", "updated": "🔁", "unchanged": "✅", "locked": "🔒", "human_push": "✋"}.get(result.status, "")
    body = f"{icon} {result.message}"
    if result.diff:
        body += f"\n\n<details><summary>Diff ({result.config_path})</summary>\n\n```diff\n{result.diff.rstrip()}\n```\n\n</details>"
    return body


async def github_apply(job: Job, ctx: RuntimeContext) -> None:
    """``@asap apply 2``: writers (or listed teams) get a PR on ``asap/<run>-p2``; others a refusal."""
    gi = integration(ctx)
    host = await asyncio.to_thread(_host, gi, job)
    await asyncio.to_thread(_reply, host, job, "⏳ ASAP is checking permissions and preparing the change…")
    body = await asyncio.to_thread(apply_for_job, ctx, gi, job, host)
    await asyncio.to_thread(_reply, host, job, body)


async def github_review(job: Job, ctx: RuntimeContext) -> None:
    """Review the PR's sharding-config changes: one comment updated in place, and a commit status."""
    from integrations.github.review import REVIEW_MARKER, review_pull

    gi = integration(ctx)
    key = f"{job.reply_to['repo']}#{job.reply_to['number']}"
    lock = _review_locks.setdefault(key, asyncio.Lock())
    async with lock:  # two quick pushes: the second review waits and then sees the newest head
        host = await asyncio.to_thread(_host, gi, job)
        number = int(job.reply_to["number"])
        outcome = await asyncio.to_thread(review_pull, host, number, runs=gi.runs())

        def publish() -> None:
            if not outcome.files and not outcome.settings_error and host.find_comment(number, REVIEW_MARKER) is None:
                return  # nothing to review and nothing said before: stay quiet
            host.upsert_comment(number, REVIEW_MARKER, outcome.body)
            host.set_status(outcome.head_sha, outcome.state, outcome.description, outcome.context)

        await asyncio.to_thread(publish)


async def post_failure(job: Job, reason: str, ctx: RuntimeContext) -> None:
    """The job's one comment says it failed and why (also used for rate-limit refusals)."""
    gi = integration(ctx)

    def work() -> None:
        host = _host(gi, job)
        if job.kind == "review":
            from integrations.github.review import REVIEW_MARKER

            host.upsert_comment(int(job.reply_to["number"]), REVIEW_MARKER,
                                f"{REVIEW_MARKER}\n### ASAP sharding review\n\n❌ The review could not run: {reason}\n")
            if job.payload.get("head_sha"):
                host.set_status(str(job.payload["head_sha"]), "error", reason[:140], "asap/sharding-review")
            return
        _reply(host, job, f"⚠️ {reason}")

    await asyncio.to_thread(work)


register_handler("github", "ask", github_ask)
register_handler("github", "explain", github_explain)
register_handler("github", "apply", github_apply)
register_handler("github", "review", github_review)
register_failure_reply("github", post_failure)
