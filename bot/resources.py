"""Where ASAP's own files are: the playbooks and the sample runs, in a checkout and in an installed wheel.

In a source checkout they are the top-level ``playbooks/`` and ``examples/runs/`` folders. A wheel (the
Docker image, ``pip install asap``) carries copies of both as package data under ``bot/_bundled/``
(``setup.py`` maps the folders there), so an install with no checkout beside it still proposes, indexes
and answers. The agents' prompts live inside the ``agents`` package (``agents/prompts/*.md``) and ship as
its package data.

A team's own playbooks folder replaces the bundled one with ``ASAP_PLAYBOOKS_DIR``; a team's runs folder is
``--runs-dir`` / ``ASAP_RUNS_DIR`` (read by :class:`bot.runs.store.LocalRunStore`). Both are read when the
process starts (the defaults are module constants of the modules that use them).
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_CHECKOUT = _PACKAGE.parent
BUNDLED = _PACKAGE / "_bundled"
"""Where a wheel puts the bundled folders (absent in a source checkout)."""


def _bundled(name: str, checkout_path: str) -> Path:
    """The wheel's copy of a bundled folder when it is installed, else the checkout's folder."""
    installed = BUNDLED / name
    return installed if installed.is_dir() else _CHECKOUT / checkout_path


def bundled_playbooks_dir() -> Path:
    """The playbooks that ship with ASAP (``playbooks/`` of the checkout, or the wheel's copy)."""
    return _bundled("playbooks", "playbooks")


def playbooks_dir() -> Path:
    """The playbooks folder in use: ``ASAP_PLAYBOOKS_DIR`` when set, else the bundled playbooks."""
    env = os.environ.get("ASAP_PLAYBOOKS_DIR", "").strip()
    return Path(env).expanduser() if env else bundled_playbooks_dir()


def sample_runs_dir() -> Path:
    """The sample runs that ship with ASAP: the default runs folder when none is configured."""
    return _bundled("runs", "examples/runs")
