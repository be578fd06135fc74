"""Model scripts on disk: `gates/fixtures/models/NAME.yaml`, one script per file, read by the one YAML
reader and validated against the current script shape (`eval_assets.providers.ModelScript`).

A case names a script with `model_fixture: NAME` (its subject becomes `script/NAME`) or
`judge_fixture: NAME`; a build or judge may name `script/NAME` as its model. Validation happens when
the gate registry is collected (`evaltrack validate`), with `path: field: message` problems.
"""

from __future__ import annotations

import re
from pathlib import Path

from eval_assets.providers import ModelScript

from ._files import ConfigError, Problem, read_yaml, validate_model

SCRIPTS_DIR = "gates/fixtures/models"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def script_file(root: Path, name: str) -> Path:
    """Where the script `name` lives under the project `root` (the name is checked: no path parts)."""
    if not _NAME.match(name) or ".." in name:
        raise ValueError(f"{name!r} is not a script name (letters, digits, '.', '_', '-'; no path)")
    return root / SCRIPTS_DIR / f"{name}.yaml"


def load_script(root: Path, name: str) -> tuple[ModelScript | None, list[Problem]]:
    """The script `name`, or the problems (`path: field: message`, path relative to `root`)."""
    try:
        path = script_file(root, name)
    except ValueError as exc:
        return None, [Problem(SCRIPTS_DIR, "name", str(exc))]
    shown = f"{SCRIPTS_DIR}/{name}.yaml"
    if not path.is_file():
        return None, [Problem(shown, "<file>", f"no script named {name!r}: {shown} does not exist")]
    data, problems = read_yaml(path, shown)
    if problems:
        return None, problems
    script, found = validate_model(ModelScript, data, shown)
    return script, found


def script_problems(root: Path) -> list[Problem]:
    """Every problem of every script file under `gates/fixtures/models/` (and any misnamed file there)."""
    directory = root / SCRIPTS_DIR
    if not directory.is_dir():
        return []
    problems: list[Problem] = []
    for path in sorted(directory.iterdir()):
        if not path.is_file() or path.name.startswith("."):  # dotfiles: a recording being staged
            continue
        if path.suffix != ".yaml":
            problems.append(
                Problem(f"{SCRIPTS_DIR}/{path.name}", "<file>", "only .yaml files are read: rename it")
            )
            continue
        problems += load_script(root, path.stem)[1]
    return problems


class ScriptBook:
    """The project's scripts by name, loaded once each (the gateway's `scripts` source)."""

    def __init__(self, root: Path):
        self.root = root
        self._loaded: dict[str, ModelScript] = {}

    def __call__(self, name: str) -> ModelScript:
        """The script `name`; raises ConfigError naming every problem when it does not load."""
        if name not in self._loaded:
            script, problems = load_script(self.root, name)
            if script is None:
                raise ConfigError(problems)
            self._loaded[name] = script
        return self._loaded[name]
