"""Nothing is written outside EVAL_HOME: the demo, the trend and bridge commands and the no-network
suite script run in a copy of the checkout (its own git repository) with EVAL_HOME outside it, and the
copy's `git status --porcelain --ignored` is clean afterwards (ignored files count: `.hypothesis/` and
`__pycache__/` are git-ignored, so a plain `git status` would not see them).

The copy imports `eval_assets` from itself (a venv whose path puts the copy before this checkout's
editable install) and runs its own `.venv/bin/evaltrack`, so the project root every command resolves is
the copy. One demo run is shared by the trend, the bridge refusal and the no-network script (the
costly part is the example builds' deterministic suites).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from eval_assets.home import PROJECT_ROOT


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def _copy_checkout(dest: Path) -> None:
    """The checkout's files (tracked, and new ones not ignored) as they are in the working tree, committed in a new repository."""
    files = [
        f
        for f in _git(PROJECT_ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split(
            "\0"
        )
        if f
    ]
    for name in files:
        source = PROJECT_ROOT / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "copy")


def _copy_venv(dest: Path) -> None:
    """`.venv` of the copy: this checkout's installed packages, with the copy first on the path."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest / ".venv")], check=True)
    site = Path(sysconfig.get_paths()["purelib"])
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (dest / ".venv" / "lib" / version / "site-packages" / "evaltrack_copy.pth").write_text(
        f"{dest}\nimport site; site.addsitedir({str(site)!r})\n"
    )
    script = dest / ".venv" / "bin" / "evaltrack"
    script.write_text(
        f"#!{dest / '.venv' / 'bin' / 'python'}\nimport sys\nfrom eval_assets.cli import main\nsys.exit(main())\n"
    )
    script.chmod(0o755)


def _run(cwd: Path, env: dict[str, str], *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(command), cwd=cwd, env=env, capture_output=True, text=True, timeout=3000, check=False
    )


@pytest.mark.e2e  # a whole demo and the no-network script: minutes (the e2e lane)
def test_demo_trend_bridge_and_no_network_suite_write_nothing_into_the_checkout(tmp_path: Path) -> None:
    copy, home = tmp_path / "checkout", tmp_path / "home"
    copy.mkdir()
    _copy_checkout(copy)
    _copy_venv(copy)
    env = {k: v for k, v in os.environ.items() if k not in ("EVAL_PROJECT_ROOT", "PYTHONPATH")}
    env.update(EVAL_HOME=str(home), LITELLM_OFFLINE_MODE="true")
    evaltrack = str(copy / ".venv" / "bin" / "evaltrack")
    where = _run(
        copy,
        env,
        str(copy / ".venv" / "bin" / "python"),
        "-c",
        "import eval_assets; print(eval_assets.__file__)",
    )
    assert where.stdout.strip() == str(copy / "eval_assets" / "__init__.py"), where.stderr[-2000:]

    demo = _run(copy, env, evaltrack, "demo", "--format", "json")
    assert demo.returncode == 0, demo.stderr[-3000:]
    decisions = {
        b["build"]: b["decision"] for b in json.loads(demo.stdout.strip().splitlines()[-1])["builds"]
    }
    assert sorted(decisions.values()) == ["allow", "block", "none"]

    trend = _run(copy, env, evaltrack, "trend", "--judge", "helpfulness", "--format", "json")
    assert trend.returncode == 0, trend.stderr[-3000:]
    [(version, shown)] = json.loads(trend.stdout).items()
    assert version.startswith("helpfulness-") and (home / shown["plot_file"]).is_file()  # under EVAL_HOME
    assert [p["position"] for p in shown["points"]] == [0, 1, 2]
    assert {p["build"] for p in shown["points"]} == set(decisions)
    assert all(p["status"] == "native" and p["bridges"] == 0 for p in shown["points"])

    refused = _run(copy, env, evaltrack, "bridge", "run", "--from", "safety-v1", "--to", version)
    assert refused.returncode == 1 and refused.stderr.startswith("refused: "), refused.stderr[-2000:]
    assert len(refused.stderr.strip().splitlines()) == 1

    script_env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}  # the script sets it
    suite = _run(copy, script_env, "bash", "scripts/suite_no_network")
    assert suite.returncode == 0, (suite.stdout + suite.stderr)[-3000:]

    left = [
        line for line in _git(copy, "status", "--porcelain", "--ignored").splitlines() if line != "!! .venv/"
    ]
    assert left == [], left
