"""The checked-in configuration, loaded once per code-location load.

An invalid project makes the code location refuse to load, with the same `path: field: message`
lines `evaltrack validate` prints.
"""

from eval_assets.config import ConfigError, load_project
from eval_assets.home import project_root


class InvalidProject(Exception):
    pass


try:
    PROJECT = load_project(project_root())
except ConfigError as exc:
    raise InvalidProject(f"eval-track configuration is invalid:\n{exc}") from None
