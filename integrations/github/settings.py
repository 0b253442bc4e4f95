"""Per-repository settings: ``.asap.yml`` on the repository's DEFAULT branch (never read from a PR).

Reading the file from the default branch means a pull request cannot widen its own review rules, link
itself to a different run, or add itself to the apply allow-list. Format (every key optional)::

    configs:                  # globs of files the auto-review looks at (default: every *.yml / *.yaml / *.sh;
      - "configs/**/*.yml"    #   a script without a MaxText/Megatron launch line is skipped)
      - "scripts/train_*.sh"
    exclude: [".github/**"]   # globs never reviewed
    runs:                     # config path -> the run it is measured by (latest analysed run)
      configs/llama3-8b.yml: "123"
    chips:                    # config path or glob -> chips it runs on (checked when no run is linked)
      configs/new-13b.yml: 256
      "configs/multislice/**": {chips: 512, slices: 2}
    review:
      enabled: true
      fail_on: problem        # problem | warning: which findings turn the commit status red
      status_context: asap/sharding-review
    apply:
      teams: ["acme/ml-infra"]   # besides people with write permission
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot import yamlsafe
from bot.errors import AsapError, ConfigError
from integrations.codehost.base import safe_repo_path

SETTINGS_FILE = ".asap.yml"
DEFAULT_GLOBS = ("**/*.yml", "**/*.yaml", "**/*.sh")
DEFAULT_EXCLUDE = (".github/**", ".asap.yml", "**/.pre-commit-config.yaml", "**/docker-compose*.yml")
MAX_REVIEWED_FILES = 20


class ReviewSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(default=True, description="review PRs that touch config files")
    fail_on: Literal["problem", "warning"] = Field(default="problem", description="findings that fail the commit status")
    status_context: str = Field(default="asap/sharding-review", max_length=100, description="commit status context")


class ApplySettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    teams: list[str] = Field(default_factory=list, description="org/team-slug whose members may apply besides writers")

    @field_validator("teams")
    @classmethod
    def _teams(cls, v: list[str]) -> list[str]:
        for t in v:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9][A-Za-z0-9._-]*", t):
                raise ValueError(f"team {t!r} must be written org/team-slug")
        return v


class ChipCount(BaseModel):
    """How many chips (and slices) a config runs on, declared for configs no run measures yet."""

    model_config = ConfigDict(extra="forbid")
    chips: int = Field(ge=1, le=1_000_000, description="total chips (devices)")
    slices: int = Field(default=1, ge=1, le=10_000, description="slices (DCN groups)")


class RepoSettings(BaseModel):
    """The ``.asap.yml`` file (see module docstring)."""

    model_config = ConfigDict(extra="forbid")
    configs: list[str] = Field(default_factory=lambda: list(DEFAULT_GLOBS), description="globs of reviewed files")
    exclude: list[str] = Field(default_factory=lambda: list(DEFAULT_EXCLUDE), description="globs never reviewed")
    runs: dict[str, str | int] = Field(default_factory=dict, description="config path -> run ID that measures it")
    chips: dict[str, ChipCount] = Field(default_factory=dict,
                                        description="config path or glob -> chips (or {chips, slices})")
    review: ReviewSettings = Field(default_factory=ReviewSettings)
    apply: ApplySettings = Field(default_factory=ApplySettings)

    @field_validator("chips", mode="before")
    @classmethod
    def _chips(cls, v: object) -> object:
        """``path: 256`` is short for ``path: {chips: 256}``."""
        if isinstance(v, dict):
            return {k: ({"chips": n} if isinstance(n, int) and not isinstance(n, bool) else n) for k, n in v.items()}
        return v

    @field_validator("runs")
    @classmethod
    def _runs(cls, v: dict[str, str | int]) -> dict[str, str | int]:
        out: dict[str, str | int] = {}
        for k, run in v.items():
            try:
                out[safe_repo_path(str(k), field="runs")] = str(run)
            except AsapError as exc:
                raise ValueError(exc.message) from None
        return out

    def matches(self, path: str) -> bool:
        """True when ``path`` is a file the auto-review should look at."""
        return any(glob_match(g, path) for g in self.configs) and not any(glob_match(g, path) for g in self.exclude)

    def chips_for(self, path: str) -> ChipCount | None:
        """The chip count declared for ``path`` (exact path first, then the first matching glob)."""
        got = self.chips.get(path)
        if got is None:
            got = next((v for g, v in self.chips.items() if glob_match(g, path)), None)
        return got

    def run_for(self, path: str) -> str | None:
        got = self.runs.get(path)
        return None if got is None else str(got)

    def configs_for_run(self, run_id: str) -> list[str]:
        return [p for p, r in self.runs.items() if str(r) == run_id]


def parse_settings(text: str | None, source: str = SETTINGS_FILE) -> RepoSettings:
    """Validate ``.asap.yml`` text (None or empty: the defaults); a bad file is a ConfigError naming the field."""
    if text is None or not text.strip():
        return RepoSettings()
    try:
        raw = yamlsafe.load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"malformed YAML{where}: {getattr(exc, 'problem', None) or exc}", source=source) from None
    if raw is None:
        return RepoSettings()
    if not isinstance(raw, dict):
        raise ConfigError(f"expected a mapping, got {type(raw).__name__}", source=source)
    try:
        return RepoSettings.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise ConfigError(err["msg"], source=source, field=loc,
                          hint="keys: configs, exclude, runs, chips, review (enabled, fail_on, status_context), apply (teams)") from None


@lru_cache(maxsize=256)
def _glob_regex(glob: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
            continue
        if glob.startswith("**", i):
            out += ".*"
            i += 2
            continue
        out += "[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c)
        i += 1
    return re.compile(out + r"\Z")


def glob_match(glob: str, path: str) -> bool:
    """``fnmatch`` with ``**`` spanning folders and ``*`` staying inside one (git-style)."""
    return bool(_glob_regex(glob).match(path))
