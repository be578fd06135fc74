"""Resources: one ConfigurableResource gives assets the track over EVAL_HOME and the project."""

from functools import cached_property
from pathlib import Path

import dagster as dg

from eval_assets.config import load_project
from eval_assets.home import EvalHome, default_home, project_root
from eval_assets.track import Track


class TrackResource(dg.ConfigurableResource):
    """Where state lives (EVAL_HOME), which project to load, and the spend journal's URL."""

    eval_home: str
    project_root: str
    journal_url: str | None = None

    @cached_property
    def track(self) -> Track:
        return Track(load_project(Path(self.project_root)), EvalHome(Path(self.eval_home)), self.journal_url)


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(
        resources={"track": TrackResource(eval_home=str(default_home()), project_root=str(project_root()))}
    )
