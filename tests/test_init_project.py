"""`evaltrack init DIR`: a project of one's own, validated, from this checkout and from a built wheel."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

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
        ".gitignore",
    }
    assert again.returncode == 1 and "not an empty directory" in again.stderr
    assert checked.returncode == 0 and "ok: 1 scenarios" in checked.stdout, checked.stderr


READ_ONLY = [
    ["validate"],
    ["release-status", "my-agent-1"],
    ["release-status", "my-agent-1", "--format", "json"],
    ["report", "my-agent-1", "--html", "{out}/report.html"],
    ["compare", "--baseline", "my-agent-1", "--candidate", "my-agent-1", "--judge-version", "helpfulness-v1"],
    ["spend"],
    ["spend", "--build", "my-agent-1"],
    ["warehouse", "verify"],
    ["review", "list"],
]


def test_read_only_commands_find_the_project_upward_and_never_create_a_home(tmp_path: Path) -> None:
    """Standing in a subdirectory of a fresh project (found upward, as git finds a repository), and
    from another folder with --project, every read-only command answers without creating
    `<project>/.eval_home` or anything else; with neither, a command names the missing project."""
    project, out, elsewhere = tmp_path / "proj", tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    assert _run(EVALTRACK, "init", project).returncode == 0
    env = {k: v for k, v in os.environ.items() if k not in ("EVAL_HOME", "EVAL_PROJECT_ROOT", "DAGSTER_HOME")}
    before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    answers = {}
    for argv in READ_ONLY:
        argv = [a.format(out=out) for a in argv]
        for cwd, extra in ((project / "scenarios" / "starter", []), (elsewhere, ["--project", str(project)])):
            done = subprocess.run(
                [str(EVALTRACK), *extra, *argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=600
            )
            assert done.returncode in (0, 1, 2), (argv, done.stdout, done.stderr)
            assert "internal error" not in done.stderr, (argv, done.stderr)
            answers.setdefault(argv[0], set()).add(done.returncode)
    after = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    assert after == before
    assert answers["release-status"] == {2} and answers["report"] == {1} and answers["compare"] == {1}
    lost = subprocess.run(
        [str(EVALTRACK), "release-status", "b"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
        timeout=600,
    )
    assert lost.returncode == 4 and "no evaltrack.yaml here or in any parent directory" in lost.stderr
    assert list(elsewhere.iterdir()) == []


def _files(root: Path, *skip: Path) -> dict[str, int]:
    """Every file under `root` (not under `skip`) with its modification time in nanoseconds."""
    out = {}
    for p in root.rglob("*"):
        if p.is_file() and not any(p.is_relative_to(s) for s in skip):
            out[p.relative_to(root).as_posix()] = p.stat().st_mtime_ns
    return out


def _printed_steps(stdout: str) -> tuple[Path, list[list[str]]]:
    """The directory `init` says to stand in (its `cd` line) and the commands after it, as printed."""
    lines = [shlex.split(line) for line in stdout.splitlines() if line.startswith("  ")]
    (cd, where), *commands = lines
    assert cd == "cd", stdout
    return Path(where), commands


@pytest.mark.e2e  # the slow lane (a wheel built and installed into a fresh venv): bash scripts/test_e2e
def test_a_built_wheel_installs_and_runs_init_then_its_printed_steps_from_where_they_say(
    tmp_path: Path,
) -> None:
    """The wheel carries the view SQL, the template and the defaults: pip install it into a fresh
    environment outside this checkout (its dependencies from this one's site-packages, no index), run
    `init`, then each printed step verbatim from the directory it names. The project is found there, its
    home is `<project>/.eval_home`, nothing is written anywhere else (the environment, the user's home,
    this checkout), a read-only command from another folder creates no home, and stderr carries no
    Dagster preview/beta warning."""
    source, wheels = tmp_path / "source", tmp_path / "wheels"
    source.mkdir()
    for part in ("pyproject.toml", "README.md"):  # built outside the checkout: no build/ here
        shutil.copy(ROOT / part, source / part)
    shutil.copytree(
        ROOT / "eval_assets", source / "eval_assets", ignore=shutil.ignore_patterns("__pycache__")
    )
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
    user, work, elsewhere = tmp_path / "user", tmp_path / "work", tmp_path / "elsewhere"
    for d in (user, work, elsewhere):
        d.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("EVAL_HOME", "EVAL_PROJECT_ROOT", "DAGSTER_HOME", "PYTHONPATH")
    }
    env |= {
        "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        "HOME": str(user),
        "LITELLM_OFFLINE_MODE": "true",
    }
    env |= {"PYTHONDONTWRITEBYTECODE": "1"}  # the interpreter's own caches are not the product's writes

    def evaltrack(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        assert argv[0] == "evaltrack", argv
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=900, cwd=cwd, env=env, check=False
        )
        assert "BetaWarning" not in done.stderr and "PreviewWarning" not in done.stderr, (
            argv,
            done.stderr[-3000:],
        )
        return done

    where = subprocess.run(
        ["python", "-c", "import eval_assets; print(eval_assets.__file__)"],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        check=False,
    )
    assert str(venv) in where.stdout, where  # the wheel's copy, not this checkout's
    checkout_home = ROOT / ".eval_home"
    before_checkout = _files(checkout_home) if checkout_home.is_dir() else None
    before_venv = _files(venv)

    made = evaltrack(["evaltrack", "init", "myproj"], cwd=work)
    assert made.returncode == 0, made.stderr
    stand, steps = _printed_steps(made.stdout)
    assert stand == work / "myproj" and [s[:2] for s in steps] == [
        ["evaltrack", "validate"],
        ["evaltrack", "build"],
        ["evaltrack", "run"],
    ]
    for step in steps:
        done = evaltrack(step, cwd=stand)
        assert done.returncode == 0, (step, done.stdout[-3000:], done.stderr[-3000:])
    assert "scenario_runs" in done.stdout and "my-agent-1" in done.stdout

    project = work / "myproj"
    home = project / ".eval_home"
    assert (home / "warehouse" / "warehouse.duckdb").is_file() and (home / "builds").is_dir()
    status = evaltrack(
        ["evaltrack", "release-status", "my-agent-1"], cwd=project / "scenarios"
    )  # found upward
    # the starter names no baseline, so its decision is none (2); what matters is that it is read
    assert status.returncode == 2 and status.stdout.startswith("build my-agent-1: none"), (
        status.stdout + status.stderr
    )
    from_elsewhere = evaltrack(
        ["evaltrack", "--project", str(project), "release-status", "my-agent-1"], cwd=elsewhere
    )
    assert (from_elsewhere.returncode, from_elsewhere.stdout) == (status.returncode, status.stdout)
    other = work / "other"
    assert evaltrack(["evaltrack", "init", str(other)], cwd=work).returncode == 0
    unread = evaltrack(["evaltrack", "--project", str(other), "release-status", "my-agent-1"], cwd=elsewhere)
    assert unread.returncode == 2 and "no decision yet" in unread.stdout, unread.stdout + unread.stderr
    lost = evaltrack(["evaltrack", "validate"], cwd=elsewhere)
    assert lost.returncode == 1 and "no evaltrack.yaml here or in any parent" in lost.stderr, lost.stderr

    assert not (other / ".eval_home").exists()  # a read-only command created no home
    # the user's home gets only matplotlib's own font cache (XDG ~/.cache, made once per user by any
    # program drawing with it), never eval-track state
    assert all(f.startswith(".cache/matplotlib/") for f in _files(user)), _files(user)
    assert _files(elsewhere) == {}
    assert sorted(p.name for p in work.iterdir()) == ["myproj", "other"]
    assert _files(venv) == before_venv  # nothing in the environment (no .eval_home in site-packages)
    assert (_files(checkout_home) if checkout_home.is_dir() else None) == before_checkout
    views = list((site / "eval_assets" / "warehouse" / "views").rglob("*.sql"))
    assert len(views) >= 10
    assert (project / "workspace.yaml").is_file()  # `evaltrack ui` in the new project loads its location


def test_importing_the_cli_and_the_code_location_reads_no_project(tmp_path: Path) -> None:
    """`--project` is read when a command runs, and the location reads its project when Dagster loads
    it: importing every command module and every module of the location, with EVAL_PROJECT_ROOT naming
    a directory that holds no project, loads nothing; loading the location then refuses that root."""
    modules = sorted(p.stem for p in (ROOT / "eval_assets" / "cli").glob("*_commands.py")) + [
        "orchestrate",
        "ui",
    ]
    defs_modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "eval_assets" / "defs").rglob("*.py")
        if p.name != "__init__.py"
    )
    probe = "import importlib, sys\n" + "".join(
        f"importlib.import_module({name!r})\n"
        for name in [*(f"eval_assets.cli.{m}" for m in modules), *defs_modules, "eval_assets.definitions"]
    )
    probe += "from eval_assets.definitions import defs\ntry:\n    defs()\nexcept Exception as exc:\n    print(type(exc).__name__)\n"
    nowhere = tmp_path / "no-project"
    nowhere.mkdir()
    env = {**os.environ, "EVAL_PROJECT_ROOT": str(nowhere), "EVAL_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "InvalidProject", done.stdout
    assert not (tmp_path / "home").exists()
