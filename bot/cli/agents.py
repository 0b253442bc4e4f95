"""``asap chat RUN``, ``asap ask "QUESTION"`` and ``asap log THREAD``: the agent team from the terminal.

``chat`` holds a conversation about one run: it reads one question per line from stdin (an interactive
prompt on a terminal), shows progress while the agents work, and keeps the thread in the memory store so
``asap chat RUN --thread ID`` continues it later, even after a restart. ``ask`` is one question, one
answer; the run ID is found in the text ("why is job 123 slow"). ``log`` prints a thread's worklog.
The model comes from configuration (see :mod:`agents.models`); with none, analyst mode answers.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from bot.cli import cli
from bot.cli.term import SafeConsole


def _conversation(ctx: click.Context) -> Any:
    from agents.conversation import Conversation

    obj = ctx.find_root().obj or {}
    return Conversation.from_env(runs_root=obj.get("runs_dir"), runs=obj.get("runs"))


def _progress(console: Console, quiet: bool) -> Any:
    if quiet:
        return None
    return lambda line: console.print(f"[dim]  .. {escape(line)}[/]", highlight=False)


@cli.command("chat")
@click.argument("run_id", metavar="RUN")
@click.option("--thread", "thread_id", default=None, help="Continue (or name) a thread; default: a new one.")
@click.option("--quiet", is_flag=True, help="Do not show progress while the agents work.")
@click.pass_context
def chat_cmd(ctx: click.Context, run_id: str, thread_id: str | None, quiet: bool) -> None:
    """Talk about a run: the analysis first, then follow-ups (one per line; empty line or 'quit' ends)."""
    out = SafeConsole(highlight=False, soft_wrap=True)
    err = SafeConsole(stderr=True, highlight=False, soft_wrap=True)
    conv = _conversation(ctx)
    thread = thread_id or f"chat-{run_id}-{__import__('uuid').uuid4().hex[:8]}"
    interactive = sys.stdin.isatty()

    async def session() -> None:
        record = conv.store.get_thread(thread)
        if record is None:
            ans = await conv.ask(f"why is run {run_id} slow?", thread_id=thread, run_id=run_id,
                                 progress=_progress(err, quiet))
            out.print(escape(ans.text))
        else:
            out.print(f"[dim]continuing thread {escape(thread)} about run {escape(str(record.get('run_id')))} "
                      f"({len(record.get('turns') or [])} earlier turns)[/]")
        while True:
            if interactive:
                out.print("[bold]you>[/] ", end="")
            line = await asyncio.to_thread(sys.stdin.readline)
            if not line:
                break
            text = line.strip()
            if not text:
                if interactive:
                    break
                continue
            if text.lower() in ("quit", "exit", "bye"):
                break
            ans = await conv.ask(text, thread_id=thread, run_id=None, progress=_progress(err, quiet))
            out.print(escape(ans.text))

    asyncio.run(session())


@cli.command("ask")
@click.argument("question")
@click.option("--thread", "thread_id", default=None, help="Ask within an existing thread.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON (text, results, usage, cost).")
@click.option("--quiet", is_flag=True, help="Do not show progress.")
@click.pass_context
def ask_cmd(ctx: click.Context, question: str, thread_id: str | None, as_json: bool, quiet: bool) -> None:
    """One question, one answer: asap ask "why is job 123 slow"."""
    conv = _conversation(ctx)
    err = SafeConsole(stderr=True, highlight=False, soft_wrap=True)
    ans = asyncio.run(conv.ask(question, thread_id=thread_id, progress=_progress(err, quiet or as_json)))
    if as_json:
        click.echo(json.dumps(ans.to_dict(), indent=2, default=str))
    else:
        SafeConsole(highlight=False, soft_wrap=True).print(escape(ans.text))


@cli.command("log")
@click.argument("thread_id", metavar="THREAD")
@click.option("--json", "as_json", is_flag=True, help="Print the entries as JSON lines.")
def log_cmd(thread_id: str, as_json: bool) -> None:
    """Print a thread's worklog: requests, tool calls (args, result, duration), model replies, answers."""
    from bot.errors import AsapError
    from bot.store import open_store

    store = open_store()
    entries = store.read_log(thread_id)
    if not entries:
        known = store.list_threads(10)
        raise AsapError(f"no worklog for thread {thread_id!r}", field="thread",
                        hint=f"recent threads: {', '.join(known)}" if known else "no threads yet")
    if as_json:
        for e in entries:
            click.echo(json.dumps(e, default=str))
        return
    out = SafeConsole(highlight=False, soft_wrap=True)
    for e in entries:
        out.print(escape(format_entry(e)))


def format_entry(e: dict[str, Any]) -> str:
    """One worklog entry as one or more readable lines."""
    kind = e.get("kind")
    who = f"{e['agent']}: " if e.get("agent") else ""
    if kind == "request":
        return f"> request ({e.get('mode')}): {e.get('text')!r}  run={e.get('run_id')} intent={e.get('intent')}"
    if kind == "tool_call":
        res = json.dumps(e.get("result") if e.get("status") == "ok" else e.get("error"), default=str)
        if len(res) > 400:
            res = res[:400] + " ..."
        return f"  {who}tool {e.get('tool')}({json.dumps(e.get('args'))}) -> {e.get('status')} in {e.get('ms')} ms\n      {res}"
    if kind == "model_reply":
        u = e.get("usage") or {}
        content = e.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        return f"  {who}model ({u.get('prompt_tokens', 0)}+{u.get('completion_tokens', 0)} tokens, {e.get('ms')} ms): {text[:300]}"
    if kind == "answer":
        u = e.get("usage") or {}
        cost = e.get("cost_usd")
        cost_s = "no price" if cost is None else f"${cost:.4f}"
        return (f"< answer ({e.get('mode')}, {u.get('total_tokens', 0)} tokens, {cost_s}, {e.get('elapsed_ms')} ms)"
                + (f" fallback: {e['fallback']}" if e.get("fallback") else "") + "\n" + "\n".join(
                    "    " + line for line in str(e.get("text", "")).splitlines()))
    rest = {k: v for k, v in e.items() if k not in ("kind", "at", "agent")}
    return f"  {who}{kind}: {json.dumps(rest, default=str)[:400]}"
