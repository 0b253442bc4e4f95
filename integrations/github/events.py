"""Turn a verified GitHub webhook delivery into a queued :class:`~bot.runtime.jobs.Job`, or a reason to ignore it.

Handled: ``issue_comment`` created or edited that mentions the bot -> ``ask`` / ``explain`` / ``apply`` jobs,
and ``pull_request`` opened / synchronize / reopened -> a ``review`` job. The job id is
``github:<X-GitHub-Delivery>``, so a redelivery is the same job and is answered once. The reply to a comment
is keyed by the comment's id, so an edited comment (``issue_comment.edited`` whose mention text changed)
updates the same reply. The bot's own comments (its login, its App id, or a body carrying a marker signed
with the server's secret) are ignored, so ASAP never answers itself; an unsigned ``<!-- asap:`` marker a
person typed makes nothing special. Pure functions: no network, so the webhook can answer 2xx in milliseconds.
"""

from __future__ import annotations

import re
from typing import Any

from bot.runtime.jobs import Job, Requester
from integrations.github.commands import find_mention, parse_command
from integrations.github.config import GitHubIntegration
from integrations.github.markdown import has_valid_marker

REPO_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/(?!\.\.?$)[A-Za-z0-9_.-]{1,100}$")
DELIVERY_RE = re.compile(r"^[A-Za-z0-9-]{1,100}$")
REVIEW_ACTIONS = frozenset({"opened", "synchronize", "reopened"})
COMMENT_ACTIONS = frozenset({"created", "edited"})


def _repo(payload: dict[str, Any]) -> str | None:
    name = (payload.get("repository") or {}).get("full_name")
    return name if isinstance(name, str) and REPO_RE.match(name) else None


def _installation(payload: dict[str, Any]) -> int | None:
    inst = (payload.get("installation") or {}).get("id")
    return inst if isinstance(inst, int) and not isinstance(inst, bool) else None


def is_own_comment(comment: dict[str, Any], gi: GitHubIntegration) -> bool:
    """True for comments ASAP wrote (login, App id, or a marker signed with the server secret)."""
    user = comment.get("user") or {}
    login = str(user.get("login") or "")
    if gi.bot_login and login.lower() == gi.bot_login.lower():
        return True
    if login.lower() == f"{gi.mention}[bot]".lower():
        return True
    app = comment.get("performed_via_github_app") or {}
    if gi.app_id and str(app.get("id")) == str(gi.app_id):
        return True
    return has_valid_marker(gi.marker_secret, str(comment.get("body") or ""))


def _edit_changes_nothing(payload: dict[str, Any], text: str, gi: GitHubIntegration) -> bool:
    """An edit whose mention text is the same as before (a typo fixed elsewhere) asks nothing new."""
    before = ((payload.get("changes") or {}).get("body") or {}).get("from")
    return isinstance(before, str) and find_mention(before, gi.mention) == text


def job_from_event(event: str, delivery: str, payload: dict[str, Any], gi: GitHubIntegration,
                   *, deadline_s: float = 300.0) -> Job | str:
    """The job for this delivery, or a short reason why it is ignored."""
    if not DELIVERY_RE.match(delivery or ""):
        return "missing or malformed X-GitHub-Delivery"
    repo = _repo(payload)
    if repo is None:
        return "no repository in the payload"
    inst = _installation(payload)
    if event == "issue_comment":
        action = payload.get("action")
        if action not in COMMENT_ACTIONS:
            return f"issue_comment {action!r} is not handled"
        comment = payload.get("comment") or {}
        issue = payload.get("issue") or {}
        number = issue.get("number")
        if not isinstance(number, int) or isinstance(number, bool):
            return "no issue number"
        if is_own_comment(comment, gi):
            return "the bot's own comment"
        text = find_mention(str(comment.get("body") or ""), gi.mention)
        if text is None:
            return "no mention"
        login = str((comment.get("user") or {}).get("login") or "")
        if not login:
            return "no comment author"
        if action == "edited" and _edit_changes_nothing(payload, text, gi):
            return "edited, but the mention asks the same"
        cmd = parse_command(text, gi.mention)
        kind = {"ask": "ask", "propose": "ask", "explain": "explain", "apply": "apply"}[cmd.action]
        return Job(
            id=f"github:{delivery}", source="github", kind=kind, thread=f"github:{repo}#{number}", run=cmd.run,  # type: ignore[arg-type]
            text=text, requester=Requester(source="github", user_id=login, display=f"@{login}"),
            reply_to={"repo": repo, "number": number},
            payload={"command": cmd.to_dict(), "installation": inst, "comment_id": comment.get("id"),
                     "is_pull": bool(issue.get("pull_request")), "edited": action == "edited"},
            deadline_s=deadline_s,
        )
    if event == "pull_request":
        action = payload.get("action")
        if action not in REVIEW_ACTIONS:
            return f"pull_request {action!r} is not reviewed"
        pr = payload.get("pull_request") or {}
        number = pr.get("number") or payload.get("number")
        head_sha = (pr.get("head") or {}).get("sha")
        if not isinstance(number, int) or not isinstance(head_sha, str):
            return "no pull request number or head sha"
        sender = str((payload.get("sender") or {}).get("login") or (pr.get("user") or {}).get("login") or "github")
        return Job(
            id=f"github:{delivery}", source="github", kind="review", thread=f"github:{repo}#{number}",
            text="", requester=Requester(source="github", user_id=sender, display=f"@{sender}"),
            reply_to={"repo": repo, "number": number},
            payload={"installation": inst, "head_sha": head_sha, "action": action}, deadline_s=deadline_s,
        )
    return f"event {event!r} is not handled"
