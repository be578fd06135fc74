"""Resources: one ConfigurableResource gives assets the track over EVAL_HOME and the project."""

from functools import cached_property
from pathlib import Path

import dagster as dg

from eval_assets.capability.track import Track, open_track
from eval_assets.home import EvalHome
from eval_assets.notify import Notifier

WEBHOOK_ENV = "EVAL_NOTIFY_WEBHOOK"


class TrackResource(dg.ConfigurableResource):
    """Where state lives (EVAL_HOME), which project to load, and the spend journal's URL."""

    eval_home: str
    project_root: str
    journal_url: str | None = None

    @cached_property
    def _opened(self) -> Track:
        return open_track(Path(self.project_root), EvalHome(Path(self.eval_home)), self.journal_url)

    def get(self) -> Track:
        """The track over this EVAL_HOME and project: the command's own inside an `evaltrack` command
        (`track_opened_once`), else opened once per resource instance."""
        return self._opened


class NotificationResource(dg.ConfigurableResource):
    """Where release-block notices go besides the Dagster log (JSONL file; webhook when set)."""

    jsonl_path: str | None = None
    webhook_url: str | None = None

    def notifier(self) -> Notifier:
        return Notifier(Path(self.jsonl_path) if self.jsonl_path else None, self.webhook_url or None)


def resources(home: EvalHome, project_root: Path) -> dict[str, dg.ConfigurableResource]:
    """The location's resources: the track over `home` and the project at `project_root`, and where
    block notices go."""
    return {
        "track": TrackResource(eval_home=str(home.root), project_root=str(project_root)),
        "notifications": NotificationResource(
            jsonl_path=str(home.block_notices),
            # read when the resource is built; left out (None) when the variable is not set
            webhook_url=dg.EnvVar(WEBHOOK_ENV) if dg.EnvVar(WEBHOOK_ENV).get_value() else None,
        ),
    }
