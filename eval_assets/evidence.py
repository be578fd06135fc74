"""A release decision names its evidence, and is believed only while that evidence is unchanged.

When a decision is made, `capture` records the current warehouse file of every partition it can read
(the build's, its baseline's and the baseline's unchanged rebuilds' `scenario_runs`, `judge_verdicts`,
`noise_bands`, `capability_reports` and `gate_results`, under the judge versions it decides on), each
hashed in full, the SHA-256 of those builds' registered manifests, and the SHA-256 of the project's
configuration that decides (`CONFIG_PARTS`: evaltrack.yaml, scenarios/, rubrics/, judges/). The record
is stored in the decision row (`release_decisions.evidence`, JSON).

`check` is what every read of a decision does (`evaltrack release-status`): the decision file and its
reasons file are hashed in full against the partition manifest (no size or mtime shortcut), then every
recorded input is looked up again:

- a file whose bytes no longer hash to what was recorded, a missing or damaged file, a manifest that
  is gone or no longer loads, an `allow` whose reasons are not all `info` (a decision file rewritten
  after an explicit `warehouse verify --rebuild`), a decision row naming another build, evidence that
  does not name the build asked about (or, for an allow, names none of its own runs and verdicts):
  **damage** (`DecisionDamaged`, exit 4, each named);
- a partition whose current file is no longer the recorded one (re-materialized after the decision),
  a partition of those builds that appeared after it, a manifest that changed, a different set of
  judge versions to decide on, a different set of builds to decide over (an unchanged rebuild of the
  baseline registered after it: it would widen the band), a configuration that changed (a statistics
  setting, a scenario, a floor), a decision file that `warehouse verify --rebuild` re-trusted rather
  than the writer recorded (a re-trust never restores an allow), or a decision recorded before
  evidence was kept: **stale** (the decision reads as `none`, exit 2, with the reasons).

Only what the partition writer recorded is trusted (`eval_assets.warehouse`); this module never reads
through a glob. It imports neither pandas, the engine nor Dagster, so a `release-status` stays cheap.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_assets.capability.builds import Builds, judges_for
from eval_assets.capability.errors import TrackError
from eval_assets.config import BuildManifest, ConfigError, Project
from eval_assets.home import EvalHome
from eval_assets.warehouse import TOMBSTONE_PREFIX, Entry, Warehouse

INPUT_TABLES = ("scenario_runs", "judge_verdicts", "noise_bands", "capability_reports", "gate_results")
"""The tables a decision reads, for each of its builds."""

FORMAT = 2
"""2: the record names the build it decided (`decided`)."""


class DecisionDamaged(Exception):
    """A decision, or an input it was made on, is damaged or gone: an internal error (exit 4)."""

    def __init__(self, problems: Sequence[str]):
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


@dataclass(frozen=True)
class CheckedDecision:
    """A recorded decision after `check`: its row, its reasons (most severe first) and, when any
    input changed after it, why it is stale (then it decides nothing)."""

    row: Mapping[str, Any]
    reasons: list[dict[str, Any]]
    stale: list[str] = field(default_factory=list)

    @property
    def decision(self) -> str:
        return "none" if self.stale else str(self.row["decision"])


def manifest_digest(home: EvalHome, build: str) -> str | None:
    """SHA-256 of a registered build's manifest file, None when it is not there."""
    try:
        return hashlib.sha256((home.builds / f"{build}.yaml").read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


CONFIG_PARTS = ("evaltrack.yaml", "scenarios", "rubrics", "judges")
"""The project files a decision depends on: settings (statistics, bounds), scenarios (their policy and
the set compared), rubrics (floors, criteria) and judges. Gates are not here: their results are
evidence of their own (`gate_results`)."""


def config_digest(root: Path) -> str:
    """SHA-256 over every file of `CONFIG_PARTS` under the project `root` (its relative path and
    bytes, in path order): any edit, addition, removal or rename changes it."""
    digest = hashlib.sha256()
    for part in CONFIG_PARTS:
        top = root / part  # a file (evaltrack.yaml) or a directory; rglob of a file or nothing is empty
        for path in sorted(p for p in (top, *top.rglob("*")) if p.is_file()):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _applies(entry: Entry, versions: set[str]) -> bool:
    judge_version = entry.partition.get("judge_version")
    return judge_version is None or judge_version in versions


def capture(
    warehouse: Warehouse,
    home: EvalHome,
    builds: Iterable[str],
    versions: Iterable[str],
    project_root: Path,
    *,
    decided: str,
) -> str:
    """The evidence record (JSON) of a decision of build `decided` about to be made over `builds`
    under `versions`.

    Call it before the decision reads anything: a file rewritten after the capture then makes the
    decision stale, never current. Each file is hashed in full now; a damaged one is quarantined and
    its tombstone recorded instead (a later `check` names it)."""
    of, wanted = sorted(set(builds)), set(versions)
    current = warehouse.current_files(INPUT_TABLES, of)
    if warehouse.rehash(current.values()):
        current = warehouse.current_files(INPUT_TABLES, of)
    files = [
        {"table": e.dataset, "partition": e.partition, "file": e.path, "sha256": e.sha256}
        for _, e in sorted(current.items())
        if _applies(e, wanted)
    ]
    manifests = {b: manifest_digest(home, b) for b in of}
    record = {
        "format": FORMAT,
        "decided": decided,
        "builds": of,
        "judge_versions": sorted(wanted),
        "files": files,
    }
    return json.dumps(
        {**record, "manifests": manifests, "config": config_digest(project_root)}, sort_keys=True
    )


def evidence_builds_of(build: str, baseline: str | None, manifests: Mapping[str, BuildManifest]) -> list[str]:
    """The builds whose partitions a decision of `build` against `baseline` may read: the build, its
    baseline, and the baseline's registered unchanged rebuilds in `manifests` (their verdicts widen the
    baseline's noise band); never a rebuild of the build itself, which a later run of it must not make
    stale."""
    if baseline is None:
        return [build]
    rebuilds = {b for b, m in manifests.items() if m.rebuild_of == baseline and b != build}
    return sorted({build, baseline} | rebuilds)


def _decision_files(warehouse: Warehouse, build: str) -> tuple[Entry | None, Entry | None]:
    current = warehouse.current_files(("release_decisions", "release_decision_reasons"), [build])
    key = json.dumps({"build": build}, sort_keys=True)
    return current.get(("release_decisions", key)), current.get(("release_decision_reasons", key))


def check(
    warehouse: Warehouse,
    home: EvalHome,
    build: str,
    versions_now: Sequence[str],
    manifest_problem: Callable[[str], str | None],
    config_now: str,
    builds_now: Callable[[str | None], Sequence[str]],
) -> CheckedDecision | None:
    """The build's recorded decision, verified (module docstring); None when none was recorded.

    `versions_now`: the judge versions the build would be decided on today; `manifest_problem`: for a
    build of the evidence, why its registered manifest does not load now (None: it loads);
    `config_now`: the project's `config_digest` now; `builds_now`: the builds a decision against a
    baseline would read today (`evidence_builds_of`). Raises DecisionDamaged naming every damaged file
    or manifest."""
    warehouse.require_manifest()
    decision_file, reasons_file = _decision_files(warehouse, build)
    if decision_file is None:
        return None
    damage = warehouse.rehash([e for e in (decision_file, reasons_file) if e is not None])
    if damage:
        raise DecisionDamaged([d.text() for d in damage])
    if reasons_file is None:
        raise DecisionDamaged([f"the decision of {build} has no release_decision_reasons file"])
    rows = warehouse.read_file(decision_file.path)
    if len(rows) != 1:
        raise DecisionDamaged([f"{decision_file.path}: {len(rows)} rows where one decision was written"])
    row = rows[0]
    if row.get("build") != build:  # a decision file of another build, copied into this partition
        raise DecisionDamaged(
            [
                f"{decision_file.path}: the decision recorded there is of build {row.get('build')!r}, not {build!r}"
            ]
        )
    reasons = sorted(
        (r for r in warehouse.read_file(reasons_file.path) if r.get("run_id") == row.get("run_id")),
        key=lambda r: int(r["rank"]),
    )
    not_info = any(r.get("severity") != "info" for r in reasons)
    if row.get("decision") == "allow" and (not_info or (not reasons and row.get("evidence"))):
        # this release writes an allow with its reasons, every one `info`: an allow beside a block,
        # investigate or none reason (or, with evidence, beside none at all) was not written that way.
        # An older release's allow (no evidence, its reasons under another run id) reads as stale.
        worst = sorted({str(r.get("severity")) for r in reasons if r.get("severity") != "info"}) or [
            "no reason"
        ]
        raise DecisionDamaged(
            [
                f"{decision_file.path}: an allow recorded beside {', '.join(worst)} in its reasons: not as written"
            ]
        )
    stale = _stale_or_damaged(warehouse, home, row, versions_now, manifest_problem, config_now, builds_now)
    if retrusted := sorted(warehouse.retrusted([decision_file.path, reasons_file.path])):
        stale.append(
            f"{', '.join(retrusted)} re-trusted by `warehouse verify --rebuild`, not written by a decision "
            "(a re-trust never restores a decision)"
        )
    return CheckedDecision(row, reasons, stale)


def _stale_or_damaged(
    warehouse: Warehouse,
    home: EvalHome,
    row: Mapping[str, Any],
    versions_now: Sequence[str],
    manifest_problem: Callable[[str], str | None],
    config_now: str,
    builds_now: Callable[[str | None], Sequence[str]],
) -> list[str]:
    build = str(row["build"])
    try:
        record = json.loads(row.get("evidence") or "")
        files, builds = list(record["files"]), list(record["builds"])
        versions, manifests = set(record["judge_versions"]), dict(record["manifests"])
        config, decided = str(record["config"]), record.get("decided")
    except (ValueError, TypeError, KeyError):
        return [f"the decision of {build} was recorded without its evidence (an older release)"]
    if record.get("format") != FORMAT:
        return [
            f"the decision of {build} was recorded with evidence of format {record.get('format')} (now {FORMAT})"
        ]
    problems: list[str] = []
    stale: list[str] = []
    if decided != build or build not in builds:
        problems.append(
            f"the evidence of the decision of {build} is of a decision of {decided!r} over {builds}, "
            f"not of {build}"
        )
    own = {
        f.get("table")
        for f in files
        if isinstance(f, dict) and (f.get("partition") or {}).get("build") == build
    }
    if row.get("decision") == "allow" and not {"scenario_runs", "judge_verdicts"} <= own:
        problems.append(
            f"the evidence of the allow of {build} names none of its own scenario_runs or judge_verdicts"
        )
    if problems:
        raise DecisionDamaged(problems)
    # a build the decision would read now but did not: an unchanged rebuild of the baseline with files
    # of its own registered after it (its verdicts widen the band); one with no files changes nothing
    new = [
        b
        for b in builds_now(row.get("baseline") or None)
        if b not in builds and warehouse.current_files(INPUT_TABLES, [b])
    ]
    if new:
        stale.append(
            f"{', '.join(new)} would be read by a decision now (an unchanged rebuild of the baseline "
            "registered after the decision widens its band)"
        )
    if config != config_now:
        stale.append(
            "the project's configuration (evaltrack.yaml, scenarios/, rubrics/ or judges/) changed after the decision"
        )
    for b in builds:
        digest = manifest_digest(home, b)
        if digest is None:
            problems.append(
                f"the registered manifest of build {b} is missing ({home.builds / (b + '.yaml')})"
            )
        elif why := manifest_problem(b):
            problems.append(f"the registered manifest of build {b} is damaged: {why}")
        elif digest != manifests.get(b):
            stale.append(f"the manifest of build {b} changed after the decision")
    if sorted(versions) != sorted(versions_now):
        stale.append(
            f"the judge versions to decide on are now {', '.join(sorted(versions_now)) or 'none'} "
            f"(decided on {', '.join(sorted(versions)) or 'none'})"
        )
    current = warehouse.current_files(INPUT_TABLES, builds)
    recorded = {(f["table"], json.dumps(f["partition"], sort_keys=True)): f for f in files}
    unchanged: list[Entry] = []
    for key, entry in sorted(current.items()):
        if not _applies(entry, versions):
            continue
        was = recorded.get(key)
        where = f"{entry.dataset}[{'|'.join(entry.partition.values())}]"
        if entry.run_id.startswith(TOMBSTONE_PREFIX):  # its file was found damaged and set aside
            unchanged.append(entry)
        elif was is None:
            stale.append(f"{where} was written after the decision")
        elif was["file"] != entry.path:
            stale.append(f"{where} was re-materialized after the decision")
        elif was["sha256"] != entry.sha256:
            problems.append(f"{entry.path}: its recorded hash is not the one the decision read")
        else:
            unchanged.append(entry)
    for key, was in sorted(recorded.items()):
        if key not in current:
            problems.append(f"{was['file']} ({was['table']}), an input of the decision, is gone")
    problems += [d.text() for d in warehouse.rehash(unchanged)]
    if problems:
        raise DecisionDamaged(problems)
    return stale


def decision_versions(project: Project, manifest: BuildManifest) -> list[str]:
    """Judge versions a release decision of `manifest` combines: the build's active versions."""
    return [j.version_id for j in judges_for(project, manifest) if j.status == "active"]


def check_decision(
    project: Project, home: EvalHome, warehouse: Warehouse, build: str
) -> CheckedDecision | None:
    """`check` for a registered build: its manifest and the manifests of the evidence are resolved
    now. A build whose manifest is missing or damaged while a decision of it is recorded is damage
    (DecisionDamaged), never a decision; an unknown build with no decision raises TrackError."""
    registry = Builds(project, home)

    def problem(b: str) -> str | None:
        try:
            registry.resolve(b)
        except (ConfigError, TrackError) as exc:
            return str(exc).splitlines()[0]
        return None

    def builds_now(baseline: str | None) -> list[str]:
        manifests = {}
        for other in registry.ids():
            try:
                manifests[other] = registry.resolve(other)
            except (ConfigError, TrackError):  # an unreadable manifest is not a rebuild anyone can use
                continue
        return evidence_builds_of(build, baseline, manifests)

    try:
        manifest = registry.resolve(build)
    except TrackError:
        warehouse.require_manifest()
        if _decision_files(warehouse, build)[0] is not None:
            raise DecisionDamaged(
                [f"a decision of {build} is recorded but its manifest {registry.path(build)} is missing"]
            ) from None
        raise
    except ConfigError as exc:
        raise DecisionDamaged(
            [f"the registered manifest of build {build} is damaged: {p}" for p in exc.problems]
        ) from None
    return check(
        warehouse,
        home,
        build,
        decision_versions(project, manifest),
        problem,
        config_digest(project.root),
        builds_now,
    )
