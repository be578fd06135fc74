"""The one loader: reads and validates every configuration file and every cross-reference."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ._models import BuildManifest, Judge, Rubric, Scenario
from ._settings import Settings

M = TypeVar("M", bound=BaseModel)
_SCALE_TYPES = frozenset({"int", "float", "bool", "labels"})

SETTINGS_FILE = "evaltrack.yaml"
# Providers served in-process (custom litellm providers); everything else must be a litellm provider.
LOCAL_PROVIDERS = frozenset({"sim", "simjudge"})


@dataclass(frozen=True)
class Problem:
    path: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.field}: {self.message}"


class ConfigError(Exception):
    """Raised with every problem found; str() is one `path: field: message` line per problem."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class Project:
    """Everything checked in under the project root, validated together."""

    root: Path
    settings: Settings
    rubrics: dict[str, Rubric]  # key: "<id>-v<version>"
    judges: dict[str, Judge]  # key: version id "<name>-v<version>"
    scenarios: dict[str, Scenario]
    sources: dict[str, Path] = field(default_factory=dict)  # object key -> file it came from

    @property
    def active_judges(self) -> list[Judge]:
        return [j for j in sorted(self.judges.values(), key=lambda j: j.version_id) if j.status == "active"]

    def rubric_for(self, judge: Judge) -> Rubric:
        return self.rubrics[f"{judge.rubric.id}-v{judge.rubric.version}"]

    def scenarios_for(self, judge: Judge) -> list[Scenario]:
        """Scenarios scored by `judge`, in id order."""
        return [s for _, s in sorted(self.scenarios.items()) if s.judge == judge.name]


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def read_yaml(path: Path, shown: str) -> tuple[Any, list[Problem]]:
    """Parse one YAML file; a parse error is a problem naming the line, never an exception."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem(shown, "<file>", f"cannot read: {exc}")]
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        reason = getattr(exc, "problem", None) or str(exc)
        return None, [Problem(shown, "<yaml>", f"malformed YAML{where}: {reason}")]
    if data is None:
        return None, [Problem(shown, "<root>", "file is empty")]
    if not isinstance(data, dict):
        return None, [Problem(shown, "<root>", f"expected a mapping, got {type(data).__name__}")]
    return data, []


def validate_model(model: type[M], data: Any, shown: str) -> tuple[M | None, list[Problem]]:
    """Validate `data` as `model`; each pydantic error becomes a `path: field: message` problem."""
    try:
        return model.model_validate(data), []
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            parts = [str(p) for p in err["loc"]]
            # a discriminated union puts the scale's type in the path (criteria.0.scale.int.max)
            parts = [
                p for i, p in enumerate(parts) if not (i and parts[i - 1] == "scale" and p in _SCALE_TYPES)
            ]
            loc = ".".join(parts) or "<root>"
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown field"
            elif err["type"] == "missing":
                msg = "required field is missing"
            elif err["type"] == "value_error":
                msg = str(err.get("ctx", {}).get("error", msg))
            elif err["type"] == "string_pattern_mismatch":
                msg = (
                    f"{err['input']!r} is not a valid id: use only letters, digits, '.', '_' and '-' "
                    "(ids are Dagster partition keys)"
                )
            problems.append(Problem(shown, loc, msg))
        return None, problems


def load_file(model: type[M], path: Path, root: Path | None = None) -> tuple[M | None, list[Problem]]:
    shown = _rel(path, root) if root else str(path)
    data, problems = read_yaml(path, shown)
    if problems:
        return None, problems
    return validate_model(model, data, shown)


def model_provider_problem(model: str) -> str | None:
    """Why `model` cannot be routed, or None. Known: the sim providers and litellm's provider list."""
    provider, sep, name = model.partition("/")
    if not sep or not name or not provider:
        return f"model {model!r} must be '<provider>/<model>' (e.g. sim/agent, openai/gpt-4o)"
    if provider in LOCAL_PROVIDERS:
        return None
    from eval_assets.providers.gateway import litellm_providers

    if provider not in litellm_providers():
        return f"unknown model provider {provider!r} in {model!r}"
    return None


def sim_params_problems(model: str, params: dict[str, Any], field: str) -> list[tuple[str, str]]:
    """(field, message) for sim knobs a sim model would reject at call time; [] for other models."""
    from eval_assets.providers._simmodel import DECODING_PARAMS, JUDGE_KNOBS, SUBJECT_KNOBS

    provider = model.partition("/")[0]
    allowed = {"sim": SUBJECT_KNOBS, "simjudge": JUDGE_KNOBS}.get(provider)
    if allowed is None:
        return []
    unknown = sorted(set(params) - allowed - DECODING_PARAMS)
    return [
        (f"{field}.{k}", f"unknown {provider} knob (known: {', '.join(sorted(allowed))})") for k in unknown
    ]


def _yaml_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.rglob("*") if p.suffix in {".yaml", ".yml"} and p.is_file())


def load_project(root: Path, *, check_registry: bool = True) -> Project:
    """Load and cross-validate scenarios/, rubrics/, judges/ and evaltrack.yaml under `root`.

    Raises ConfigError listing every problem (not just the first). Reads only; writes nothing.
    `check_registry=False` skips the judge identity registry (judges/registry.yaml) checks; only
    `evaltrack judges record` loads that way, to record what a normal load refuses as unrecorded.
    """
    # --- judge governance: the identity registry is not a judge file (see _registry.py) ---
    from ._registry import REGISTRY_PATH, registry_problems

    root = root.resolve()
    problems: list[Problem] = []
    sources: dict[str, Path] = {}

    settings_path = root / SETTINGS_FILE
    settings: Settings | None = Settings()
    if settings_path.exists():
        settings, found = load_file(Settings, settings_path, root)
        problems += found

    unloadable: set[str] = set()  # names/keys of files that failed: no dangling-reference echo for them

    def collect(model: type[M], sub: str, key_of: Any, kind: str, id_field: str) -> dict[str, M]:
        out: dict[str, M] = {}
        for path in _yaml_files(root / sub):
            if path == root / REGISTRY_PATH:  # judge governance: the registry, not a judge version
                continue
            shown = _rel(path, root)
            data, found = read_yaml(path, shown)
            obj = None
            if not found:
                obj, found = validate_model(model, data, shown)
            problems.extend(found)
            if obj is None:
                if isinstance(data, dict):
                    for name in ("id", "name"):
                        if isinstance(data.get(name), str):
                            unloadable.add(f"{kind}:{data[name]}")
                            unloadable.add(f"{kind}:{data[name]}-v{data.get('version')}")
                continue
            key = key_of(obj)
            if key in out:
                problems.append(
                    Problem(
                        shown,
                        id_field,
                        f"duplicate {kind} {key!r} (also in {_rel(sources[kind + key], root)})",
                    )
                )
                continue
            out[key] = obj
            sources[kind + key] = path
        return out

    rubrics = collect(Rubric, "rubrics", lambda r: r.key, "rubric", "version")
    judges = collect(Judge, "judges", lambda j: j.version_id, "judge", "version")
    scenarios = collect(Scenario, "scenarios", lambda s: s.id, "scenario", "id")

    for key, judge in judges.items():
        shown = _rel(sources["judge" + key], root)
        ref = f"{judge.rubric.id}-v{judge.rubric.version}"
        if ref not in rubrics and f"rubric:{ref}" not in unloadable:
            problems.append(
                Problem(shown, "rubric", f"unknown rubric {judge.rubric.id!r} version {judge.rubric.version}")
            )
        if (why := model_provider_problem(judge.model)) is not None:
            problems.append(Problem(shown, "model", why))
        for fld, msg in sim_params_problems(judge.model, judge.params, "params"):
            problems.append(Problem(shown, fld, msg))
        if (
            settings is not None
            and judge.model.partition("/")[0] in LOCAL_PROVIDERS
            and judge.model not in settings.prices
        ):
            problems.append(
                Problem(
                    shown,
                    "model",
                    f"no price for {judge.model!r}: register it under `prices:` in {SETTINGS_FILE}",
                )
            )
        if (
            judge.bridges_from is not None
            and judge.bridges_from not in judges
            and f"judge:{judge.bridges_from}" not in unloadable
        ):
            problems.append(Problem(shown, "bridges_from", f"unknown judge version {judge.bridges_from!r}"))

    active_names = {j.name for j in judges.values() if j.status == "active"}
    known_names = {j.name for j in judges.values()}
    for key, scenario in scenarios.items():
        shown = _rel(sources["scenario" + key], root)
        if scenario.judge not in known_names:
            if f"judge:{scenario.judge}" in unloadable:
                continue
            problems.append(Problem(shown, "judge", f"unknown judge {scenario.judge!r}"))
        elif scenario.judge not in active_names:
            problems.append(Problem(shown, "judge", f"judge {scenario.judge!r} has no active version"))

    if settings is not None:
        for model in settings.prices:
            if (why := model_provider_problem(model)) is not None:
                problems.append(Problem(SETTINGS_FILE, f"prices.{model}", why))

    # --- judge governance: each judge version's content against judges/registry.yaml ---
    if check_registry:
        problems += registry_problems(root, judges, rubrics, sources)

    if problems or settings is None:
        raise ConfigError(problems)
    return Project(
        root=root, settings=settings, rubrics=rubrics, judges=judges, scenarios=scenarios, sources=sources
    )


def validate_build(manifest: BuildManifest, project: Project, shown: str) -> list[Problem]:
    """Cross-references of a build manifest against the loaded project."""
    problems = []
    if (why := model_provider_problem(manifest.subject.model)) is not None:
        problems.append(Problem(shown, "subject.model", why))
    for jv in manifest.judges or []:
        if jv not in project.judges:
            problems.append(Problem(shown, "judges", f"unknown judge version {jv!r}"))
        elif project.judges[jv].status != "active":
            problems.append(Problem(shown, "judges", f"judge version {jv!r} is deprecated"))
    for fld, msg in sim_params_problems(manifest.subject.model, manifest.subject.params, "subject.params"):
        problems.append(Problem(shown, fld, msg))
    overrides = manifest.subject.params.get("scenario_skill") or {}
    if isinstance(overrides, dict):
        for sid in sorted(set(overrides) - set(project.scenarios)):
            problems.append(Problem(shown, f"subject.params.scenario_skill.{sid}", "unknown scenario id"))
    model = manifest.subject.model
    if model.partition("/")[0] in LOCAL_PROVIDERS and model not in project.settings.prices:
        problems.append(
            Problem(
                shown,
                "subject.model",
                f"no price for {model!r}: register it under `prices:` in {SETTINGS_FILE}",
            )
        )
    if manifest.baseline == manifest.id:
        problems.append(Problem(shown, "baseline", "a build cannot be its own baseline"))
    if manifest.rebuild_of == manifest.id:
        problems.append(Problem(shown, "rebuild_of", "a build cannot be a rebuild of itself"))
    return problems


def load_build(path: Path, project: Project) -> BuildManifest:
    """Load one build manifest and check it against the project; raises ConfigError."""
    manifest, problems = load_file(BuildManifest, path)
    if manifest is not None:
        problems += validate_build(manifest, project, str(path))
    if problems or manifest is None:
        raise ConfigError(problems)
    return manifest
