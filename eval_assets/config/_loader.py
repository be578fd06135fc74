"""The one loader: reads and validates every configuration file and every cross-reference."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from eval_assets.providers import (
    DECODING_PARAMS,
    JUDGE_KNOBS,
    LOCAL_PROVIDERS,
    SUBJECT_KNOBS,
    litellm_providers,
)

from ._files import ConfigError, Problem, load_file, read_yaml, relative_shown, validate_model
from ._models import BuildManifest, Judge, Rubric, Scenario, SimJudgeKnobs, SimSubjectKnobs
from ._project import Project
from ._registry import REGISTRY_PATH, registry_problems
from ._settings import LOCAL_PROVIDER, Settings

M = TypeVar("M", bound=BaseModel)

SETTINGS_FILE = "evaltrack.yaml"


def model_provider_problem(model: str) -> str | None:
    """Why `model` cannot be routed, or None. Known: the sim providers and litellm's provider list."""
    provider, sep, name = model.partition("/")
    if not sep or not name or not provider:
        return f"model {model!r} must be '<provider>/<model>' (e.g. sim/agent, openai/gpt-4o)"
    if provider in LOCAL_PROVIDERS or provider == LOCAL_PROVIDER:
        return None  # a local/<name> must also be declared: `local_model_problem`
    if provider not in litellm_providers():
        return f"unknown model provider {provider!r} in {model!r}"
    return None


def local_model_problem(model: str, settings: Settings) -> str | None:
    """Why `model`, a `local/<name>`, is not declared in `local_models:` of evaltrack.yaml; None when it
    is, or is no local model."""
    provider, _, name = model.partition("/")
    if provider != LOCAL_PROVIDER or name in settings.local_models:
        return None
    known = ", ".join(sorted(settings.local_models)) or "none"
    return (
        f"local model {name!r} is not declared under `local_models:` in {SETTINGS_FILE} (declared: {known})"
    )


def local_judge_problems(judge: Judge, settings: Settings) -> list[tuple[str, str]]:
    """(field, message) when a judge on a local model does not pin that model's weights and runtime
    (`local_model`) as declared: the pin is part of the judge's identity, so new weights or a new
    runtime are a new judge version, never a silent change of an old one."""
    provider, _, name = judge.model.partition("/")
    declared = settings.local_models.get(name) if provider == LOCAL_PROVIDER else None
    if declared is None:
        if judge.local_model is not None and provider != LOCAL_PROVIDER:
            return [
                ("local_model", f"only a judge on a local/<name> model pins one ({judge.model!r} is not)")
            ]
        return []
    if judge.local_model is None:
        return [
            (
                "local_model",
                f"a judge on {judge.model!r} must pin its weights and runtime: "
                f"local_model: {{sha256: {declared.sha256}, runtime: {declared.runtime}}}",
            )
        ]
    out = []
    if judge.local_model.sha256 != declared.sha256:
        out.append(("local_model.sha256", f"differs from {SETTINGS_FILE} local_models.{name}.sha256"))
    if judge.local_model.runtime != declared.runtime:
        out.append(("local_model.runtime", f"differs from {SETTINGS_FILE} local_models.{name}.runtime"))
    return out


def sim_params_problems(model: str, params: dict[str, Any], field: str) -> list[tuple[str, str]]:
    """(field, message) for sim knobs a sim model would reject or misread; [] for other models.

    Unknown knobs, and known ones of the wrong type or range (`seed: abc`, `skill: true`, `skill: 7`),
    are refused here, with every other field, instead of failing (or defaulting) at call time.
    """
    provider = model.partition("/")[0]
    allowed = {"sim": SUBJECT_KNOBS, "simjudge": JUDGE_KNOBS, "script": frozenset()}.get(provider)
    if allowed is None:
        return []
    unknown = sorted(set(params) - allowed - DECODING_PARAMS, key=str)
    out = [
        (f"{field}.{k}", f"unknown {provider} knob (known: {', '.join(sorted(allowed)) or 'none'})")
        for k in unknown
    ]
    if provider == "script":  # a script takes no knobs: its turns are authored
        return out
    knobs = SimSubjectKnobs if provider == "sim" else SimJudgeKnobs
    _, found = validate_model(knobs, {k: v for k, v in params.items() if k not in unknown}, "")
    return out + [(f"{field}.{p.field}", p.message) for p in found]


YAML_SUFFIX = ".yaml"


def _yaml_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.rglob("*") if p.suffix == YAML_SUFFIX and p.is_file())


def misnamed_yaml(directory: Path, root: Path) -> list[Problem]:
    """`.yml`, `.YAML`, ... files under `directory`: only `.yaml` is read, so each is refused by name
    (never silently ignored, never read by one command and skipped by another)."""
    if not directory.is_dir():
        return []
    return [
        Problem(
            relative_shown(p, root),
            "<file>",
            f"only {YAML_SUFFIX} files are read: rename it to {p.with_suffix(YAML_SUFFIX).name}",
        )
        for p in sorted(directory.rglob("*"))
        if p.suffix.lower() in {".yaml", ".yml"} and p.suffix != YAML_SUFFIX and p.is_file()
    ]


def load_project(root: Path, *, check_registry: bool = True) -> Project:
    """Load and cross-validate scenarios/, rubrics/, judges/ and evaltrack.yaml under `root`.

    Raises ConfigError listing every problem (not just the first). Reads only; writes nothing.
    `check_registry=False` skips the judge identity registry (judges/registry.yaml) checks; only
    `evaltrack judges record` loads that way, to record what a normal load refuses as unrecorded.
    """
    # judge governance: the identity registry (see _registry.py) is not a judge file
    root = root.resolve()
    if not root.is_dir() or not any((root / sub).is_dir() for sub in ("scenarios", "judges")):
        # never an empty project read as valid (a mistyped --project, an installed package's own root)
        raise ConfigError(
            [
                Problem(
                    str(root), "<project>", "not a project directory: it has neither scenarios/ nor judges/"
                )
            ]
        )
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
            shown = relative_shown(path, root)
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
                        f"duplicate {kind} {key!r} (also in {relative_shown(sources[kind + key], root)})",
                    )
                )
                continue
            out[key] = obj
            sources[kind + key] = path
        return out

    for sub in ("rubrics", "judges", "scenarios"):
        problems += misnamed_yaml(root / sub, root)
    rubrics = collect(Rubric, "rubrics", lambda r: r.key, "rubric", "version")
    judges = collect(Judge, "judges", lambda j: j.version_id, "judge", "version")
    scenarios = collect(Scenario, "scenarios", lambda s: s.id, "scenario", "id")

    for key, judge in judges.items():
        shown = relative_shown(sources["judge" + key], root)
        ref = f"{judge.rubric.id}-v{judge.rubric.version}"
        if ref not in rubrics and f"rubric:{ref}" not in unloadable:
            problems.append(
                Problem(shown, "rubric", f"unknown rubric {judge.rubric.id!r} version {judge.rubric.version}")
            )
        if (why := model_provider_problem(judge.model)) is not None:
            problems.append(Problem(shown, "model", why))
        for fld, msg in sim_params_problems(judge.model, judge.params, "params"):
            problems.append(Problem(shown, fld, msg))
        if judge.parser_version == 2 and "response_format" in judge.params:
            problems.append(
                Problem(shown, "params.response_format", "parser_version 2 sends the rubric's schema itself")
            )
        if settings is not None:
            if (why := local_model_problem(judge.model, settings)) is not None:
                problems.append(Problem(shown, "model", why))
            else:
                problems += [Problem(shown, fld, msg) for fld, msg in local_judge_problems(judge, settings)]
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
        shown = relative_shown(sources["scenario" + key], root)
        if scenario.judge not in known_names:
            if f"judge:{scenario.judge}" in unloadable:
                continue
            problems.append(Problem(shown, "judge", f"unknown judge {scenario.judge!r}"))
        elif scenario.judge not in active_names:
            problems.append(Problem(shown, "judge", f"judge {scenario.judge!r} has no active version"))

    if settings is not None and settings.repeats == "adaptive":
        start = settings.adaptive.start
        short = sorted(key for key, scenario in scenarios.items() if scenario.repeats <= start)
        if short:
            named = ", ".join(short[:3]) + (f" and {len(short) - 3} more" if len(short) > 3 else "")
            problems.append(
                Problem(
                    SETTINGS_FILE,
                    "adaptive.start",
                    f"{start} is not below the repeats of scenario(s) {named}: adaptive repeats top up to a "
                    "scenario's `repeats`, so it must exceed the start",
                )
            )
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


def validate_build(
    manifest: BuildManifest, project: Project, shown: str, known_builds: Collection[str]
) -> list[Problem]:
    """Cross-references of a build manifest against the loaded project and the builds it may name."""
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
        for sid in sorted(set(overrides) - set(project.scenarios), key=str):
            problems.append(Problem(shown, f"subject.params.scenario_skill.{sid}", "unknown scenario id"))
    model = manifest.subject.model
    if (why := local_model_problem(model, project.settings)) is not None:
        problems.append(Problem(shown, "subject.model", why))
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
    elif manifest.baseline is not None and manifest.baseline not in known_builds:
        known = sorted(known_builds)
        listed = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "") if known else "none"
        problems.append(
            Problem(
                shown,
                "baseline",
                f"unknown baseline build {manifest.baseline!r}: register the baseline first "
                f"(`evaltrack build add`); known builds: {listed}",
            )
        )
    if manifest.rebuild_of == manifest.id:
        problems.append(Problem(shown, "rebuild_of", "a build cannot be a rebuild of itself"))
    return problems


def manifest_ids(directory: Path) -> set[str]:
    """The ids of the build manifests (`*.yaml`) in `directory`; unreadable ones name nothing."""
    ids = set()
    for path in sorted(directory.glob(f"*{YAML_SUFFIX}")) if directory.is_dir() else []:
        data, problems = read_yaml(path, str(path))
        if not problems and isinstance(data.get("id"), str):
            ids.add(data["id"])
    return ids


def load_build(path: Path, project: Project, known_builds: Collection[str] | None = None) -> BuildManifest:
    """Load one build manifest and check it against the project; raises ConfigError.

    `known_builds`: the builds its baseline may name (the registered builds, for `build add` and a
    run). None: the ids of the manifests beside it (a directory of examples names its own baseline).
    """
    manifest, problems = load_file(BuildManifest, path)
    if manifest is not None:
        known = manifest_ids(path.parent) if known_builds is None else known_builds
        problems += validate_build(manifest, project, str(path), known)
    if problems or manifest is None:
        raise ConfigError(problems)
    return manifest


# the project a command loaded, by its root, while the command's runs go (`project_loaded_once`)
_COMMAND_PROJECTS: dict[Path, Project] = {}


@contextmanager
def project_loaded_once(project: Project) -> Iterator[None]:
    """While inside, `project_at(project.root)` (the Dagster resource's project, the CLI's instance)
    is `project` as the command loaded it instead of a new load: `evaltrack run` launches six runs and `demo` about
    twenty, and each load of a large project reads and validates every one of its files.
    Runs the daemon or the UI launch are outside and load the project as it is on disk then."""
    root = project.root.resolve()
    previous = _COMMAND_PROJECTS.get(root)
    _COMMAND_PROJECTS[root] = project
    try:
        yield
    finally:
        if previous is None:
            del _COMMAND_PROJECTS[root]
        else:
            _COMMAND_PROJECTS[root] = previous


def project_at(root: Path) -> Project:
    """The project at `root`: the command's own (`project_loaded_once`) while one is in force, else
    loaded from disk now."""
    loaded = _COMMAND_PROJECTS.get(root.resolve())
    return loaded if loaded is not None else load_project(root)
