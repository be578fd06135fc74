"""Configuration: pydantic models and the one loader that validates them together."""

from ._loader import (
    ConfigError,
    Problem,
    Project,
    load_build,
    load_file,
    load_project,
    model_provider_problem,
    validate_build,
)
from ._models import (
    BoolScale,
    BuildManifest,
    Criterion,
    FloatScale,
    IntScale,
    Judge,
    LabelScale,
    Message,
    Policy,
    Rubric,
    Scenario,
    Subject,
)
from ._settings import Engine, Price, Settings, Spend

__all__ = [
    "BoolScale",
    "BuildManifest",
    "ConfigError",
    "Criterion",
    "Engine",
    "FloatScale",
    "IntScale",
    "Judge",
    "LabelScale",
    "Message",
    "Policy",
    "Price",
    "Problem",
    "Project",
    "Rubric",
    "Scenario",
    "Settings",
    "Spend",
    "Subject",
    "load_build",
    "load_file",
    "load_project",
    "model_provider_problem",
    "validate_build",
]
