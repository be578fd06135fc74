"""`evaltrack init DIR`: a project of one's own, validated, from this checkout and from a built wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVALTRACK = Path(sys.executable).with_name("evaltrack")


def _run(
    *argv: str | Path, cwd: Path | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False
    )


def test_init_writes_a_project_that_validates_and_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    dest = tmp_path / "myproject"

    made = _run(EVALTRACK, "init", dest)
    again = _run(EVALTRACK, "init", dest)
    checked = _run(EVALTRACK, "--project", dest, "validate")

    assert made.returncode == 0, made.stderr
    assert {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()} == {
        "evaltrack.yaml",
        "agent.py",
        "scenarios/starter/starter.order-status.yaml",
        "rubrics/helpfulness-v1.yaml",
        "judges/helpfulness-v1.yaml",
        "judges/registry.yaml",
        "gates/project.yaml",
        "gates/cases/starter-tool-loop.yaml",
        "gates/cases/starter-exhausted-script.yaml",
        "gates/fixtures/models/starter-tool-loop.yaml",
        "gates/fixtures/models/starter-exhausted.yaml",
        "docs/specs/project.md",
        "workspace.yaml",
        "examples/builds/my-agent.yaml",
    }
    assert again.returncode == 1 and "not an empty directory" in again.stderr
    assert checked.returncode == 0 and "ok: 1 scenarios" in checked.stdout, checked.stderr


def test_a_built_wheel_installs_inits_and_runs_a_project_offline(tmp_path: Path) -> None:
    """The wheel carries the view SQL, the template and the defaults: pip install it into a fresh
    environment (its dependencies from this one's site-packages, no index), init, add the build, run."""
    source, wheels = tmp_path / "source", tmp_path / "wheels"
    source.mkdir()
    for part in (
        "pyproject.toml",
        "README.md",
        "eval_assets",
    ):  # built outside the checkout: it writes build/
        copy = shutil.copytree if (ROOT / part).is_dir() else shutil.copy
        copy(ROOT / part, source / part)
    uv = Path(sys.executable).with_name("uv")  # offline: the build backend from uv's cache, no index
    built = _run(uv, "build", "--wheel", "--offline", "-o", wheels, source)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = wheels.glob("eval_track-*.whl")
    venv = tmp_path / "venv"
    assert _run(sys._base_executable, "-m", "venv", "--without-pip", venv).returncode == 0  # type: ignore[attr-defined]
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    (site / "dependencies.pth").write_text(
        sysconfig.get_path("purelib") + "\n"
    )  # after the wheel's own files
    installed = _run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        venv / "bin" / "python",
        "install",
        "--no-deps",
        "--no-index",
        wheel,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    evaltrack, project, home = venv / "bin" / "evaltrack", tmp_path / "proj", tmp_path / "home"
    where = _run(
        venv / "bin" / "python", "-c", "import eval_assets; print(eval_assets.__file__)", cwd=tmp_path
    )
    assert str(venv) in where.stdout, where  # the wheel's copy, not this checkout's

    steps = [
        ("init", project),
        ("--project", project, "validate"),
        ("--project", project, "--home", home, "build", "add", project / "examples/builds/my-agent.yaml"),
        ("--project", project, "--home", home, "run", "--build", "my-agent-1"),
    ]
    for step in steps:
        done = _run(evaltrack, *step, cwd=tmp_path)
        assert done.returncode == 0, (step, done.stdout[-3000:], done.stderr[-3000:])

    assert (project / "workspace.yaml").is_file()  # `evaltrack ui` in the new project loads its location
    views = list((site / "eval_assets" / "warehouse" / "views").rglob("*.sql"))
    assert len(views) >= 10
    assert "scenario_runs" in done.stdout and "my-agent-1" in done.stdout
    assert os.path.exists(home / "warehouse" / "warehouse.duckdb")


def test_no_command_module_loads_the_code_location_before_project_is_read() -> None:
    """`--project` is read when the command runs; a command module that imports the Dagster
    definitions at import time would load the default project's judges instead (the installed
    package's root: no judge at all), and `run` would fail on an unknown partition."""
    modules = sorted(p.stem for p in (ROOT / "eval_assets" / "cli").glob("*_commands.py")) + [
        "orchestrate",
        "ui",
    ]
    probe = "import importlib, sys\n" + "".join(
        f"importlib.import_module('eval_assets.cli.{m}')\n" for m in modules
    )
    probe += "print(sorted(m for m in sys.modules if m.startswith('eval_assets.defs.') and m != 'eval_assets.defs.selections'))"
    done = _run(sys.executable, "-c", probe, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
