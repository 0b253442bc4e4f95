"""Writing untrusted text into GitHub-flavoured markdown, and the signed markers of ASAP's own comments.

Text ASAP did not write itself (op and run names from a profile or ``run.yaml``, config paths and values
from a pull request, the words of a comment echoed in an error, a model's explanation) must not act on
GitHub when it is posted: an ``@user`` or ``@org/team`` would notify people, HTML would render (or hide
text in a comment), and a ``<!-- asap:... -->`` marker would pose as one of ASAP's own comments.

* :func:`text` escapes for running markdown: ``&``, ``<``, ``>`` become entities (so no tag and no HTML
  comment survives), mentions get a zero-width space after the ``@`` (``@&#8203;user``: shown as ``@user``,
  notifies nobody, the way Renovate and Dependabot quote logins), and markdown punctuation that would
  turn the text into links, images, emphasis or tables is backslash-escaped.
* :func:`code` puts a value in an inline code span (no mention, link or tag is rendered inside one),
  with a fence longer than any backtick run in the value.
* :func:`fenced` is the block form (diffs), with a fence longer than any backtick run inside.

ASAP finds its own comments by author AND a marker only it can write: ``<!-- asap:<kind>=<key>
sig=<hmac> -->`` where the HMAC is keyed by a server secret (``GITHUB_WEBHOOK_SECRET`` unless
``ASAP_GITHUB_MARKER_SECRET`` is set). A person can copy a marker they see into a comment of their own,
but it is then not ASAP's comment (wrong author), and cannot forge one for another key.
"""

from __future__ import annotations

import hashlib
import hmac
import re

ZWSP = "&#8203;"
_MENTION = re.compile(r"(?<![A-Za-z0-9_])@(?=[A-Za-z0-9])")  # as GitHub: after a non-word character (not e-mail)
_PUNCT = re.compile(r"([\\`*_\[\]|!#~])")
_BACKTICKS = re.compile(r"`+")
MARKER_RE = re.compile(r"<!-- asap:(?P<kind>[a-z]+)=(?P<key>[^\s>]{1,200}) sig=(?P<sig>[0-9a-f]{32}) -->")


def _inert(s: str) -> str:
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _PUNCT.sub(r"\\\1", s)
    return _MENTION.sub("@" + ZWSP, s)


def text(value: object, *, limit: int = 4000) -> str:
    """``value`` as inert markdown text on one line (see module docstring); cut at ``limit`` characters.

    A span the text itself puts in backticks (``e.g. `@asap apply 2` ``) stays a code span (via :func:`code`,
    inert too), so examples of commands read as commands and notify nobody.
    """
    s = " ".join(str(value).split())
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    parts = re.split(r"`([^`]+)`", s)
    return "".join(code(p) if i % 2 else _inert(p) for i, p in enumerate(parts))


def plain(value: object, *, limit: int = 4000) -> str:
    """Like :func:`text` but leaves markdown punctuation alone, for ASAP's own sentences that carry URLs and
    paths (an escaped ``_`` would break a link): HTML and mentions are still neutralised."""
    s = " ".join(str(value).split())
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MENTION.sub("@" + ZWSP, s)


def lines(value: object, *, limit: int = 20000) -> str:
    """Like :func:`text` but keeps line breaks (each line escaped on its own; blank lines kept)."""
    raw = str(value)[:limit]
    return "\n".join(text(line) if line.strip() else "" for line in raw.splitlines())


def code(value: object, *, limit: int = 300, cell: bool = False) -> str:
    """``value`` as an inline code span; GitHub renders nothing inside one (mentions, links, tags).

    ``cell``: the span sits in a table cell, where GitHub splits on ``|`` even inside code, so it is ``\\|``.
    """
    s = " ".join(str(value).split())[:limit] or " "
    if cell:
        s = s.replace("|", "\\|")
    s = s.replace("<!--", "<!-\u200b-")  # stays readable; can never be an HTML comment if pasted elsewhere
    longest = max((len(m) for m in _BACKTICKS.findall(s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def fenced(value: str, lang: str = "") -> str:
    """A fenced code block holding ``value`` verbatim, with a fence no line inside can close."""
    longest = max((len(m) for m in _BACKTICKS.findall(value)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{value.rstrip(chr(10))}\n{fence}"


def _sig(secret: bytes, kind: str, key: str) -> str:
    return hmac.new(secret, f"asap-marker:{kind}={key}".encode(), hashlib.sha256).hexdigest()[:32]


def marker(secret: bytes, kind: str, key: str) -> str:
    """The hidden first line of an ASAP comment: ``<!-- asap:<kind>=<key> sig=<hmac> -->``."""
    safe_key = re.sub(r"[^A-Za-z0-9._:#/@+=-]", "-", key)[:200]
    return f"<!-- asap:{kind}={safe_key} sig={_sig(secret, kind, safe_key)} -->"


def has_valid_marker(secret: bytes, body: str) -> bool:
    """True when ``body`` carries a marker signed with ``secret`` (i.e. ASAP wrote it, or copied it whole)."""
    if not secret:
        return False
    for m in MARKER_RE.finditer(body or ""):
        if hmac.compare_digest(m.group("sig"), _sig(secret, m.group("kind"), m.group("key"))):
            return True
    return False
