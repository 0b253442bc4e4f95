"""What an ``@asap`` mention in a GitHub comment asks for, parsed from untrusted text.

The parser only ever extracts a command word, a run ID (``[A-Za-z0-9][A-Za-z0-9._-]{0,63}``), a proposal
number (1..20) and, for apply, a repository-relative config path that must pass
:func:`~integrations.codehost.base.safe_repo_path`. Nothing in the comment can name an endpoint, a
secret, a file outside the repository, or an action other than these four; everything else is just the
question text handed to the conversation. A word after "run" (or "of") that is not a run ID
(``../311``, ``a/b``) is an error said back to the person ("no run '../311'"): it is never looked up, and
never replaced by the thread's previous run.

    @asap why is run 123 slow?        -> ask      (run 123)
    @asap propose 123                 -> propose  (run 123)
    @asap explain 2 [of run 123]      -> explain  (proposal 2)
    @asap apply 2 [of run 123] [to configs/x.yml] -> apply
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Literal

from bot.errors import AsapError
from integrations.codehost.base import safe_repo_path

RUN_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
MAX_QUESTION = 2000

_RUN_WORDS = r"(?:run|job|training\s+run|experiment)\s*[-_:#]?\s*"


@dataclass(frozen=True)
class Command:
    action: Literal["ask", "propose", "explain", "apply"]
    text: str  # the question as asked (after the mention), trimmed
    run: str | None = None
    index: int | None = None
    config_path: str | None = None
    error: str | None = None  # a refused argument: the reply says why, nothing else happens

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Command:
        return cls(**{k: data[k] for k in ("action", "text", "run", "index", "config_path", "error") if k in data})


def mention_re(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w@/.-])@{re.escape(name)}(?![\w-])", re.IGNORECASE)


def find_mention(body: str, name: str = "asap") -> str | None:
    """The text after the first ``@name`` mention (to the end of that paragraph), or None when not mentioned.

    Mentions inside code blocks and quoted replies (``> ...``) do not count.
    """
    if not body:
        return None
    cleaned = re.sub(r"```.*?(?:```|\Z)", "", body, flags=re.DOTALL)
    cleaned = re.sub(r"`[^`\n]*`", "", cleaned)
    cleaned = "\n".join(line for line in cleaned.splitlines() if not line.lstrip().startswith(">"))
    m = mention_re(name).search(cleaned)
    if m is None:
        return None
    rest = cleaned[m.end():]
    para = re.split(r"\n\s*\n", rest.strip(), maxsplit=1)[0]
    return " ".join(para.split())[:MAX_QUESTION]


class BadRunId(ValueError):
    """The word after "run" is not a run ID (``../311``, ``a/b``): said back, never looked up or replaced."""

    def __init__(self, token: str) -> None:
        self.token = token
        super().__init__(token)


def _token_run(token: str) -> str:
    """The run ID in the word after "run"/"of", or BadRunId naming the word as written."""
    word = token.strip("`'\"").rstrip(".?!,;:)")
    if re.fullmatch(RUN_ID, word):
        return word
    raise BadRunId(word[:80])


# Words that follow "run" in a sentence without naming one ("why is this run slow?"): the thread's run is meant.
_NOT_IDS = frozenset("slow so is now this that it was still again faster slower and with on in the a at so? "
                     "takes took has had does did".split())


def _run_in(text: str) -> str | None:
    for m in re.finditer(rf"\b{_RUN_WORDS}#?(\S+)", text, re.IGNORECASE):
        word = m.group(1).rstrip(".?!,;:)")
        if word and word.lower() not in _NOT_IDS:
            return _token_run(m.group(1))
    m = re.search(rf"(?<![\w/])#({RUN_ID})\b", text)
    return m.group(1).rstrip(".?!,") if m else None


def bad_run_error(token: str) -> str:
    """What the reply says about a run word that is not a run ID (it is shown in a code span by the reply)."""
    return (f"no run {token!r}: a run ID is letters, digits, '.', '_' and '-' (e.g. `311`), "
            "so nothing was looked up")


def parse_command(text: str, mention: str = "asap") -> Command:
    """Parse the text after the mention (see module docstring); never raises.

    ``mention`` is the configured mention word (``ASAP_GITHUB_MENTION``), used in the examples an error shows.
    """
    t = text.strip()
    low = t.lower()
    m = re.match(r"^(apply|explain)\b\s*(?:proposal|option|number)?\s*#?(\d{1,3})?\b(.*)$", low, re.DOTALL)
    if m:
        action = m.group(1)
        if m.group(2) is None:
            return Command(action=action, text=t, error=f"say which proposal, e.g. `@{mention} {action} 2`")  # type: ignore[arg-type]
        index = int(m.group(2))
        tail = t[len(t) - len(m.group(3)):]
        if not 1 <= index <= 20:
            return Command(action=action, text=t, error=f"proposal {index} is out of range (1..20)")  # type: ignore[arg-type]
        run = None
        error = None
        rm = re.search(rf"\b(?:of|for|from)\s+(?:{_RUN_WORDS})?#?(\S+)", tail, re.IGNORECASE)
        if rm:
            try:
                run = _token_run(rm.group(1))
            except BadRunId as exc:
                error = bad_run_error(exc.token)
        config = None
        if action == "apply":
            pm = re.search(r"\b(?:to|in|on)\s+(\S+)", tail, re.IGNORECASE)
            if pm:
                raw = pm.group(1).strip("`'\"").rstrip(".,;")
                try:
                    config = safe_repo_path(raw)
                except AsapError as exc:
                    error = error or f"refused config path: {exc.message}"
        return Command(action=action, text=t, run=run, index=index, config_path=config, error=error)  # type: ignore[arg-type]
    m = re.match(rf"^propose\b\s*(?:meshes\s+)?(?:for\s+)?(?:{_RUN_WORDS})?#?(\S+)?", t, re.IGNORECASE)
    action = "propose" if m else "ask"
    try:
        if m and m.group(1):
            return Command(action="propose", text=t, run=_token_run(m.group(1)))
        return Command(action=action, text=t, run=_run_in(t))  # type: ignore[arg-type]
    except BadRunId as exc:
        return Command(action=action, text=t, error=bad_run_error(exc.token))  # type: ignore[arg-type]
