"""The judge identity registry: `judges/registry.yaml`, the recorded content of every judge version.

A judge version is ONE unit (docs/methods.md: judge versions): model, provider family, api_base, prompt, rubric
reference AND the rubric's content, decoding params, parser version and output-token cap. The first
time a version id is used, `record_new_versions` (the `evaltrack judges record` command) writes the
unit's content hash, a hash per field (so a later change can be named), and its status. From then on
the loader (`load_project`, hence `evaltrack validate` and the code location) enforces:

- the same id with different content is an error naming the judge and each changed field;
- a version recorded as deprecated can never be active again, and its id can never carry other content;
- a version that is not recorded is an error ("not recorded in judges/registry.yaml: run
  `evaltrack judges record`"): validation never writes, so a first use is an explicit, reviewed step;
- a status change (active -> deprecated) must be recorded too, so the registry's history is complete;
- a new active version of a judge name that already has an earlier version (in judges/ or in the
  registry) must declare `bridges_from: <an earlier version of the same name>` (the newest is suggested).

Not part of the unit: `status` (tracked as history), `bridges_from` and `bridge_builds` (how the version
is bridged, not what it is). YAML comments and key order never matter: hashes are over the validated
models. Params are hashed with sorted keys; the rubric's content keeps its declared order, because the
order of a label scale is what the judge is shown (worst to best).

A recorded version whose file was removed stays in the registry (its id stays taken); that is not an
error. Judges that failed to load, or whose rubric did not resolve, are skipped here: their problem is
already reported, and their unit cannot be hashed until it is fixed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from eval_assets.safe_write import write_file

from ._files import ConfigError, Problem, read_yaml, validate_model
from ._models import Judge, Rubric
from ._project import Project

REGISTRY_PATH = "judges/registry.yaml"
HASH_SCHEME = 1
RECORD_HINT = "run `evaltrack judges record`"

# The unit's fields, in the order problems name them. "rubric" is the reference (id, version);
# "rubric_content" is the referenced rubric itself, reported against the judge file's `rubric` field.
IDENTITY_FIELDS: tuple[str, ...] = (
    "model",
    "family",
    "api_base",
    "prompt",
    "rubric",
    "rubric_content",
    "params",
    "parser_version",
    "max_output_tokens",
)
LOCAL_IDENTITY_FIELD = "local_model"
"""A further identity field, present only for a judge on a local model (its weights and runtime)."""
_FIELD_HASH_CHARS = 16  # names a change; the unit's own hash (full sha256) decides whether one happened

_HEADER = """\
# Judge identity registry: the recorded content of every judge version id (docs/methods.md: judge versions).
# Written by `evaltrack judges record`; never edit it by hand. `evaltrack validate` refuses a judge
# version whose content differs from what is recorded here, a deprecated version made active again,
# a deprecated id reused, and any version or status change not recorded yet.
"""


# --- the unit's content and hashes ------------------------------------------------------------


def _canonical(value: Any, *, sort_keys: bool) -> str:
    return json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def identity(judge: Judge, rubric: Rubric) -> dict[str, str]:
    """The unit's content as one canonical JSON text per field of `IDENTITY_FIELDS`."""
    return {
        "model": _canonical(judge.model, sort_keys=True),
        "family": _canonical(judge.family, sort_keys=True),
        "api_base": _canonical(judge.api_base, sort_keys=True),
        "prompt": _canonical(judge.prompt, sort_keys=True),
        "rubric": _canonical(judge.rubric.model_dump(mode="json"), sort_keys=True),
        # declared order kept: a label scale's order is part of what the judge is shown
        # a flag at its default is left out: adding it did not change any recorded version's content
        "rubric_content": _canonical(
            rubric.model_dump(
                mode="json", exclude=None if rubric.judge_sees_trajectory else {"judge_sees_trajectory"}
            ),
            sort_keys=False,
        ),
        "params": _canonical(judge.params, sort_keys=True),
        "parser_version": _canonical(judge.parser_version, sort_keys=True),
        "max_output_tokens": _canonical(judge.max_output_tokens, sort_keys=True),
        # a judge on a local model: the weights' SHA-256 and runtime (absent otherwise, so the content
        # of every judge on a hosted or sim model is what it was before this field existed)
        **(
            {LOCAL_IDENTITY_FIELD: _canonical(judge.local_model.model_dump(mode="json"), sort_keys=True)}
            if judge.local_model is not None
            else {}
        ),
    }


def field_hashes(judge: Judge, rubric: Rubric) -> dict[str, str]:
    """A short sha256 per identity field: enough to name which field changed."""
    return {name: _sha(text)[:_FIELD_HASH_CHARS] for name, text in identity(judge, rubric).items()}


def content_hash(judge: Judge, rubric: Rubric) -> str:
    """The unit's sha256 over every identity field's full canonical content (scheme `HASH_SCHEME`)."""
    return _sha(_canonical({"scheme": HASH_SCHEME, **identity(judge, rubric)}, sort_keys=True))


# --- the registry file ------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StatusChange(_Strict):
    status: Literal["active", "deprecated"]
    recorded_at: str = Field(min_length=1)


class RegistryEntry(_Strict):
    name: str = Field(min_length=1)
    version: Annotated[int, Field(ge=1)]
    content_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    fields: dict[str, str]
    status_history: Annotated[list[StatusChange], Field(min_length=1)]

    @property
    def status(self) -> str:
        return self.status_history[-1].status

    def deprecated_at(self) -> str | None:
        return next((c.recorded_at for c in self.status_history if c.status == "deprecated"), None)


class RegistryFile(_Strict):
    scheme: Literal[1]
    judges: dict[str, RegistryEntry] = Field(default_factory=dict)


def read_registry(root: Path) -> tuple[RegistryFile | None, list[Problem]]:
    """The registry under `root`; a missing file is an empty registry (every version is unrecorded).

    A malformed file is a problem (and None), never an exception.
    """
    path = root / REGISTRY_PATH
    if not path.exists():
        return RegistryFile(scheme=1), []
    data, problems = read_yaml(path, REGISTRY_PATH)
    if problems:
        return None, problems
    registry, problems = validate_model(RegistryFile, data, REGISTRY_PATH)
    if registry is None:
        return None, problems
    bad = [
        Problem(REGISTRY_PATH, f"judges.{key}", f"key must be '{e.name}-v{e.version}' (its name and version)")
        for key, e in registry.judges.items()
        if key != f"{e.name}-v{e.version}"
    ]
    return (None, bad) if bad else (registry, [])


def write_registry(root: Path, registry: RegistryFile) -> Path:
    """Write the registry atomically (temp file, fsync, rename); entries in version-id order."""
    path = root / REGISTRY_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "scheme": registry.scheme,
        "judges": {k: registry.judges[k].model_dump(mode="json") for k in sorted(registry.judges)},
    }
    body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    return write_file(path, _HEADER + body)


# --- the rules --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Finding:
    problem: Problem
    # what `record_new_versions` may do about it; None: nothing (the user must fix the judge file)
    record: Literal["new", "deprecate"] | None = None
    version_id: str = ""


def _shown_field(name: str) -> str:
    return "rubric" if name == "rubric_content" else name


def _changed(
    vid: str, entry: RegistryEntry, now: dict[str, str], judge: Judge, shown: str
) -> list[tuple[str, str]]:
    """(field shown, what changed) for each identity field whose hash differs from the recorded one."""
    out = []
    for name in (*IDENTITY_FIELDS, LOCAL_IDENTITY_FIELD):
        if entry.fields.get(name) == now.get(name):
            continue
        if name == "rubric_content":
            if entry.fields.get("rubric") != now["rubric"]:
                continue  # another rubric is referenced: that is the change to name, not its content
            what = f"the content of rubric {judge.rubric.id!r} version {judge.rubric.version} changed"
        elif name not in entry.fields:
            what = f"{name} was not recorded"
        else:
            what = f"{name} changed"
        out.append((_shown_field(name), what))
    if not out:  # the unit hash differs but no field hash does: name the whole unit, never pass it
        out.append(("version", "its content hash changed"))
    return out


def _findings(
    judges: Mapping[str, Judge],
    rubrics: Mapping[str, Rubric],
    shown_of: Mapping[str, str],
    registry: RegistryFile,
) -> list[_Finding]:
    found: list[_Finding] = []
    for vid, judge in sorted(judges.items()):
        rubric = rubrics.get(f"{judge.rubric.id}-v{judge.rubric.version}")
        if rubric is None:
            continue  # the dangling rubric is reported by the loader; the unit cannot be hashed yet
        shown = shown_of[vid]
        entry = registry.judges.get(vid)
        if entry is None:
            found.append(
                _Finding(
                    Problem(
                        shown, "version", f"judge {vid!r} is not recorded in {REGISTRY_PATH}: {RECORD_HINT}"
                    ),
                    record="new",
                    version_id=vid,
                )
            )
            continue
        same = entry.content_hash == content_hash(judge, rubric)
        if entry.status == "deprecated":
            when = entry.deprecated_at()
            if not same:
                for fld, what in _changed(vid, entry, field_hashes(judge, rubric), judge, shown):
                    found.append(
                        _Finding(
                            Problem(
                                shown,
                                fld,
                                f"judge {vid!r} was deprecated ({when}) and its id can never be reused with "
                                f"other content ({what}): give this judge a new version",
                            )
                        )
                    )
            elif judge.status == "active":
                found.append(
                    _Finding(
                        Problem(
                            shown,
                            "status",
                            f"judge {vid!r} was deprecated ({when}) and can never be active again: "
                            "add a new version instead",
                        )
                    )
                )
            continue
        if not same:
            nxt = f"{judge.name}-v{_next_version(judge.name, judges, registry)}"
            for fld, what in _changed(vid, entry, field_hashes(judge, rubric), judge, shown):
                found.append(
                    _Finding(
                        Problem(
                            shown,
                            fld,
                            f"judge {vid!r}: {what} since the version was recorded; a judge version is one "
                            f"unit: put the change in a new version ({nxt}, with `bridges_from: {vid}`)",
                        )
                    )
                )
            continue
        if judge.status == "deprecated":  # recorded active, now deprecated: recordable
            found.append(
                _Finding(
                    Problem(
                        shown,
                        "status",
                        f"judge {vid!r}: status change active -> deprecated is not recorded in "
                        f"{REGISTRY_PATH}: {RECORD_HINT}",
                    ),
                    record="deprecate",
                    version_id=vid,
                )
            )
    found += _bridge_findings(judges, shown_of, registry)
    return found


def _versions_by_name(judges: Mapping[str, Judge], registry: RegistryFile) -> dict[str, dict[int, str]]:
    out: dict[str, dict[int, str]] = {}
    for vid, judge in judges.items():
        out.setdefault(judge.name, {})[judge.version] = vid
    for vid, entry in registry.judges.items():
        out.setdefault(entry.name, {})[entry.version] = vid
    return out


def _next_version(name: str, judges: Mapping[str, Judge], registry: RegistryFile) -> int:
    return max(_versions_by_name(judges, registry).get(name, {0: ""})) + 1


def _bridge_findings(
    judges: Mapping[str, Judge], shown_of: Mapping[str, str], registry: RegistryFile
) -> list[_Finding]:
    """A new active version of a judge that already has an earlier version must bridge from one."""
    by_name = _versions_by_name(judges, registry)
    found = []
    for vid, judge in sorted(judges.items()):
        if judge.status != "active":
            continue
        earlier = {v: i for v, i in by_name[judge.name].items() if v < judge.version}
        shown = shown_of[vid]
        if judge.bridges_from is None:
            if earlier:
                prev = earlier[max(earlier)]
                listed = ", ".join(earlier[v] for v in sorted(earlier))
                found.append(
                    _Finding(
                        Problem(
                            shown,
                            "bridges_from",
                            f"judge {vid!r} is a new active version of {judge.name!r}, which already has "
                            f"{listed}: declare `bridges_from: {prev}` (a bridge run publishes the offset)",
                        )
                    )
                )
        elif judge.bridges_from in judges and judge.bridges_from not in earlier.values():
            found.append(
                _Finding(
                    Problem(
                        shown,
                        "bridges_from",
                        f"judge {vid!r} bridges from {judge.bridges_from!r}, which is not an earlier "
                        f"version of {judge.name!r}",
                    )
                )
            )
        # bridges_from naming no loaded version is reported by the loader ("unknown judge version")
    return found


def _shown_of(judges: Mapping[str, Judge], sources: Mapping[str, Path], root: Path) -> dict[str, str]:
    out = {}
    for vid in judges:
        path = sources.get("judge" + vid)
        if path is None:
            out[vid] = f"judges/{vid}.yaml"
            continue
        try:
            out[vid] = str(path.relative_to(root))
        except ValueError:
            out[vid] = str(path)
    return out


def registry_problems(
    root: Path,
    judges: Mapping[str, Judge],
    rubrics: Mapping[str, Rubric],
    sources: Mapping[str, Path],
) -> list[Problem]:
    """Every judge-identity problem of the loaded judges against `root/judges/registry.yaml`.

    Reads only. Called by `load_project`; `sources` maps "judge<version id>" to the judge's file.
    """
    registry, problems = read_registry(root)
    if registry is None:
        return problems
    return [f.problem for f in _findings(judges, rubrics, _shown_of(judges, sources, root), registry)]


def record_new_versions(project: Project, *, now: datetime | None = None) -> list[str]:
    """Record first uses and deprecations in `judges/registry.yaml`; return one line per change.

    Load the project with `load_project(root, check_registry=False)` first (a normal load refuses
    unrecorded versions). Records only what is recordable: a version id never recorded (its hashes and
    status) and a recorded active version now deprecated (a status-history entry). Any other identity
    problem (changed content, a deprecated id reused or reactivated, a missing or wrong
    `bridges_from`) raises ConfigError listing them, and nothing is written. Nothing to record: the file
    is left untouched and [] is returned. Lines look like "helpfulness-v2: recorded (active)".
    """
    root = project.root
    registry, problems = read_registry(root)
    if registry is None:
        raise ConfigError(problems)
    findings = _findings(
        project.judges, project.rubrics, _shown_of(project.judges, project.sources, root), registry
    )
    hard = [f.problem for f in findings if f.record is None]
    if hard:
        raise ConfigError(hard)
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    entries = dict(registry.judges)
    lines = []
    for f in findings:
        judge = project.judges[f.version_id]
        if f.record == "new":
            rubric = project.rubric_for(judge)
            entries[f.version_id] = RegistryEntry(
                name=judge.name,
                version=judge.version,
                content_hash=content_hash(judge, rubric),
                fields=field_hashes(judge, rubric),
                status_history=[StatusChange(status=judge.status, recorded_at=stamp)],
            )
            lines.append(f"{f.version_id}: recorded ({judge.status})")
        elif f.record == "deprecate":
            old = entries[f.version_id]
            history = [*old.status_history, StatusChange(status="deprecated", recorded_at=stamp)]
            entries[f.version_id] = old.model_copy(update={"status_history": history})
            lines.append(f"{f.version_id}: status active -> deprecated recorded")
    if lines:
        write_registry(root, RegistryFile(scheme=registry.scheme, judges=entries))
    return lines
