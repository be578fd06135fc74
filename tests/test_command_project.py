"""A command loads its project once: the runs it launches and the code location it loads use that load
(`project_loaded_once`), and opening the Dagster instance does not import the track's stack."""

from __future__ import annotations

import shutil
from pathlib import Path

from shared import fresh_python

from eval_assets.capability.track import Track, track_opened_once
from eval_assets.config import Project, load_project, project_at, project_loaded_once
from eval_assets.defs.resources import TrackResource
from eval_assets.home import PROJECT_ROOT, EvalHome


def _resource(home: EvalHome, root: Path) -> TrackResource:
    return TrackResource(eval_home=str(home.root), project_root=str(root))


def test_runs_inside_a_command_use_its_project_and_runs_outside_load_it_from_disk(
    project: Project, home: EvalHome
) -> None:
    with project_loaded_once(project):
        assert _resource(home, PROJECT_ROOT).get().project is project
        assert project_at(PROJECT_ROOT) is project
    outside = _resource(home, PROJECT_ROOT).get().project
    assert outside is not project
    assert outside.scenarios.keys() == project.scenarios.keys()


def test_runs_inside_a_command_use_its_track_and_runs_outside_open_their_own(
    project: Project, home: EvalHome
) -> None:
    """`track_opened_once`: each of a command's runs takes the command's track (its project, home,
    warehouse and journal as opened), not a new one; another home, or outside, a track of its own."""
    track = Track(project, home)
    other_home = EvalHome(home.root.parent / "other_home")
    with track_opened_once(track):
        assert _resource(home, PROJECT_ROOT).get() is track
        assert project_at(PROJECT_ROOT) is project
        assert _resource(other_home, PROJECT_ROOT).get() is not track
    outside = _resource(home, PROJECT_ROOT).get()
    assert outside is not track and outside.project is not project


def test_a_project_at_another_root_is_loaded_from_disk_while_a_command_holds_one(
    project: Project, home: EvalHome, tmp_path: Path
) -> None:
    other_root = tmp_path / "other"
    for sub in ("scenarios", "rubrics", "judges"):
        shutil.copytree(PROJECT_ROOT / sub, other_root / sub)
    shutil.copy(PROJECT_ROOT / "evaltrack.yaml", other_root / "evaltrack.yaml")
    [first, *_] = sorted((other_root / "scenarios").rglob("*.yaml"))
    first.unlink()  # one scenario fewer: a load of this root, not the command's project
    with project_loaded_once(project):
        other = project_at(other_root)
    assert other is not project
    assert len(other.scenarios) == len(project.scenarios) - 1
    assert load_project(other_root).scenarios.keys() == other.scenarios.keys()


def test_the_code_location_loaded_inside_a_command_serves_the_project_the_command_loaded(
    tmp_path: Path,
) -> None:
    """A command and the code location it loads see one project: a file edited on disk after the
    command loaded the project (here the nightly schedule) is not half-seen, the location's schedule
    is the command's. Outside a command the location reads the disk as it is then."""
    project = tmp_path / "project"
    project.mkdir()
    for part in ("evaltrack.yaml", "rubrics", "judges", "scenarios"):
        source = PROJECT_ROOT / part
        (shutil.copytree if source.is_dir() else shutil.copyfile)(source, project / part)
    probe = (
        "import json, pathlib, sys\n"
        "from eval_assets.config import load_project, project_loaded_once\n"
        "root = pathlib.Path(sys.argv[1])\n"
        "project = load_project(root)\n"
        "settings = root / 'evaltrack.yaml'\n"
        "settings.write_text(settings.read_text() + '\\nnightly_cron: \"7 3 * * *\"\\n')\n"
        "from eval_assets.definitions import defs\n"
        "with project_loaded_once(project):\n"
        "    served = defs().get_schedule_def('nightly_capability_track').cron_schedule\n"
        "print(json.dumps([project.settings.nightly_cron, served, load_project(root).settings.nightly_cron]))"
    )
    command, location, disk = fresh_python(probe, str(project), cwd=tmp_path, EVAL_PROJECT_ROOT=str(project))
    assert location == command != disk == "7 3 * * *"
