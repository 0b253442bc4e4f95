"""Comments an edit keeps that still name the value it changed.

ASAP's edits are byte-preserving: a value is replaced and the rest of its line, comment included, is kept
(``tensor_parallel_degree = 1  # 8-way TP``). A comment that names the old number now misstates the file. ASAP
never rewrites a person's words; it says which line keeps such a comment, so the reviewer of the proposal or
of the "apply" pull request can fix it.

Only formats whose comments start with ``#`` (YAML, TOML, shell launch scripts) are checked; JSON has none.
A comment is the ``#`` (at the start of the line or after a space) in the part of the line the edit left
unchanged, after the last changed character, so a ``#`` inside a changed value is never taken for one.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter

_NUMBER = re.compile(r"\d+")
HASH_COMMENT_FORMATS = frozenset({"maxtext", "ici_mesh", "megatron", "torchtitan", "llmfoundry"})


def stale_comment_notes(old: str, new: str, path: str) -> list[str]:
    """One note per edited line whose kept comment names a number the edit removed from that line."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    notes: list[str] = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "replace":
            continue
        # ASAP's edits change lines in place and add new keys after the last one: a replaced block pairs by offset
        for k in range(min(i2 - i1, j2 - j1)):
            found = _stale(old_lines[i1 + k], new_lines[j1 + k])
            if found is not None:
                comment, value = found
                notes.append(
                    f"{path} line {j1 + k + 1} keeps its comment {comment!r}, which still names the old value "
                    f"{value}: update the comment by hand"
                )
    return notes


def _stale(old: str, new: str) -> tuple[str, str] | None:
    """(comment, old number) when ``new`` keeps ``old``'s comment and that comment names a number the edit took
    out of the line's code; None otherwise."""
    kept_from = len(old) - len(_common_suffix(old, new))
    hashes = [i for i, ch in enumerate(old) if ch == "#" and i >= kept_from and (i == 0 or old[i - 1].isspace())]
    if not hashes:
        return None
    comment = old[hashes[0]:]
    code_old, code_new = old[: len(old) - len(comment)], new[: len(new) - len(comment)]
    removed = Counter(_NUMBER.findall(code_old)) - Counter(_NUMBER.findall(code_new))
    in_comment = set(_NUMBER.findall(comment))
    for value in removed:
        if value in in_comment:
            return comment.strip(), value
    return None


def _common_suffix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[len(a) - 1 - n] == b[len(b) - 1 - n]:
        n += 1
    return a[len(a) - n:]
