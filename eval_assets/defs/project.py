"""The checked-in configuration, loaded once per code-location load: in an `evaltrack` command that
materializes, the command's own load (`project_loaded_once`: a large project's load is on the path to
`evaltrack run`'s first model call), elsewhere (the code server, the daemon)
from disk.

An invalid project makes the code location refuse to load, with the same `path: field: message`
lines `evaltrack validate` prints.
"""

from eval_assets.config import ConfigError, project_at
from eval_assets.home import project_root


class InvalidProject(Exception):
    pass


try:
    PROJECT = project_at(project_root())
except ConfigError as exc:
    raise InvalidProject(f"eval-track configuration is invalid:\n{exc}") from None
