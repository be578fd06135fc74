"""What a check returns or raises, and the context it is called with.

A check is a plain callable `check(ctx: GateContext) -> CheckReturn`:

- return `None`, an empty list, or `Outcome(passed=True, ...)`: the gate passes;
- return a non-empty list of strings (findings) or `Outcome(passed=False, ...)`, or raise
  `GateFailed`: the gate fails, and the findings / message say why;
- return or raise `Skip`: the gate FAILS (a gate at or past its milestone may not skip);
- raise anything else: the gate is `error` (it could not run), which blocks like a failure.
"""

from __future__ import annotations

import unittest
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_assets.clock import Clock, utc_now
from eval_assets.config import Project, Subject, load_project


class GateFailed(Exception):
    """Raise from a check (or a corpus procedure) to fail with a message; not an error."""


class Skip(Exception):
    """Raise or return from a check to skip. At or past the gate's milestone a skip is a failure."""


# unittest's SkipTest is honoured as a skip too (and therefore fails a gate, like `Skip`).
SKIP_TYPES: tuple[type[BaseException], ...] = (Skip, unittest.SkipTest)


@dataclass(frozen=True)
class Outcome:
    """A check's verdict. `trials` is reported by property drivers, `members` by corpus drivers."""

    passed: bool
    message: str = ""
    findings: tuple[str, ...] = ()
    trials: int | None = None
    members: int | None = None

    @classmethod
    def ok(cls, message: str = "", **counts: int) -> Outcome:
        """A passing outcome (`trials=` / `members=` may be given)."""
        return cls(True, message, (), counts.get("trials"), counts.get("members"))

    @classmethod
    def failed(cls, message: str, findings: Sequence[str] = (), **counts: int) -> Outcome:
        """A failing outcome with a message and optional findings."""
        return cls(False, message, tuple(findings), counts.get("trials"), counts.get("members"))


CheckReturn = Outcome | Sequence[str] | Skip | None


@dataclass
class GateContext:
    """Everything a check may use. Built by the runner for each gate; checks must not mutate it.

    `members`, `procedure`, `generator`, `predicate` and `case_path` are filled for the matching
    kind only. `project()` loads the checked-in project under `root` once per suite run (raises
    `ConfigError` if it is invalid). `hooks` and `extra_scan_paths` are wiring seams passed through
    `run_suite` (e.g. a Dagster run for the canary gate), keyed by documented names.
    """

    root: Path
    gate_id: str
    kind: str
    build: str | None
    milestone: int
    subject: Subject | None = None
    clock: Clock = utc_now
    members: tuple[Path, ...] = ()
    procedure: Callable[..., Any] | None = None
    generator: Callable[..., Any] | None = None
    predicate: Callable[..., Any] | None = None
    min_trials: int = 0
    case_path: Path | None = None
    extra_scan_paths: tuple[Path, ...] = ()
    hooks: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    project_loader: Callable[[], Project] | None = None

    def project(self) -> Project:
        """The project under `root`, loaded once per suite run. Raises ConfigError when invalid."""
        if self.project_loader is None:
            return load_project(self.root)
        return self.project_loader()

    def scratch_project(self) -> Project:
        """`project()` for a throwaway home (`Project.for_scratch_home`): a check that runs the track
        writes only under its own home, never into a bucket or database evaltrack.yaml names."""
        return self.project().for_scratch_home()
