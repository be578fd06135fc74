"""Configuration files: the problem record, the one problem-list error, and the one way to read and
validate a YAML file into a model (every refusal a `path: field: message` problem, never an exception)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ._yaml import YamlRefused, read_yaml_file

M = TypeVar("M", bound=BaseModel)
_SCALE_TYPES = frozenset({"int", "float", "bool", "labels"})


@dataclass(frozen=True)
class Problem:
    """One reason an input is refused: `path: field: message`. A problem of a line-oriented input (a
    trajectory export, a human-score file) also names its 1-based `line` (0: the file as a whole):
    `path:line: field: message`, the field left out when empty."""

    path: str
    field: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        if self.line is None:
            return f"{self.path}: {self.field}: {self.message}"
        where = f"{self.path}:{self.line}" if self.line else self.path
        return ": ".join(part for part in (where, self.field, self.message) if part)


class ProblemsFound(Exception):
    """The one problem-list error: raised with every `Problem` found (not just the first); str() is
    one line per problem. The named kinds below differ only in what refused the input, so a caller
    can say which (a configuration, a trajectory export, a human-score file)."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class ConfigError(ProblemsFound):
    """A configuration was refused; str() is one `path: field: message` line per problem."""


def relative_shown(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def read_yaml(path: Path, shown: str) -> tuple[Any, list[Problem]]:
    """Parse one YAML file through the one YAML reader (`_yaml.read_yaml_file`: size cap, no aliases,
    bounded nesting, unique keys, finite numbers); a refusal is a problem naming the field or line,
    never an exception."""
    try:
        data = read_yaml_file(path)
    except YamlRefused as exc:
        return None, [Problem(shown, fld, msg) for fld, msg in exc.issues]
    if data is None:
        return None, [Problem(shown, "<root>", "file is empty")]
    if not isinstance(data, dict):
        return None, [Problem(shown, "<root>", f"expected a mapping, got {type(data).__name__}")]
    return data, []


_EXPECTED = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "text",
    "bool_type": "true or false",
    "finite_number": "a finite number",
    "dict_type": "a mapping",
    "list_type": "a list",
}


def _shown_value(value: Any) -> str:
    """A rejected input as the file wrote it (true, "abc", 7, .inf), shortened."""
    if isinstance(value, bool) or value is None:
        text = {True: "true", False: "false", None: "null"}[value]
    elif isinstance(value, float) and not math.isfinite(value):
        text = ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    elif isinstance(value, int | float | str):
        text = json.dumps(value, ensure_ascii=False)
    else:
        text = f"a {'mapping' if isinstance(value, dict) else type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


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
            elif err["type"] in _EXPECTED:
                msg = f"expected {_EXPECTED[err['type']]}, got {_shown_value(err.get('input'))}"
            elif err["type"] == "string_pattern_mismatch":
                msg = (
                    f"{err['input']!r} is not a valid id: use only letters, digits, '.', '_' and '-' "
                    "(ids are Dagster partition keys)"
                )
            problems.append(Problem(shown, loc, msg))
        return None, problems


def load_file(model: type[M], path: Path, root: Path | None = None) -> tuple[M | None, list[Problem]]:
    """Read and validate one YAML file as `model`; the problems name `path` relative to `root`."""
    shown = relative_shown(path, root) if root else str(path)
    data, problems = read_yaml(path, shown)
    if problems:
        return None, problems
    return validate_model(model, data, shown)
