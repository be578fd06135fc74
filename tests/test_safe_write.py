"""Every file a command writes goes over a regular file or a new path only (issue 45): a FIFO, a device
node, a symlink or a directory at the target is refused naming it, nothing is written, and no temp file
is left beside it, whichever command writes (`report --html`, `fixtures record`, `trajectory convert`,
`init`) and whatever fails."""

from __future__ import annotations

import ast
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from eval_assets.cli import main
from eval_assets.home import PROJECT_ROOT
from eval_assets.safe_write import UnsafeTarget, check_target, write_file, write_files

KINDS = ("fifo", "symlink", "dangling-symlink", "directory", "device", "socket")


def make(kind: str, path: Path) -> Callable[[], object]:
    """Put a `kind` at `path`; returns what tells it is unchanged afterwards."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        aim = path.with_name("aimed-at.txt")
        aim.write_text("kept")
        path.symlink_to(aim)
        return lambda: (path.is_symlink(), aim.read_text())
    elif kind == "dangling-symlink":
        path.symlink_to(path.with_name("nowhere"))
        return lambda: (path.is_symlink(), path.with_name("nowhere").exists())
    elif kind == "directory":
        path.mkdir()
        (path / "inside").write_text("kept")
        return lambda: (path / "inside").read_text()
    elif kind == "device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers
        except PermissionError:
            pytest.skip("making a device node needs root")
    elif kind == "socket":
        import socket

        # bound by a name relative to its directory: a socket's path is capped at 107 bytes and
        # tmp_path under a deep TMPDIR exceeds it
        sock = socket.socket(socket.AF_UNIX)
        here = os.getcwd()
        os.chdir(path.parent)
        try:
            sock.bind(path.name)
        finally:
            os.chdir(here)
            sock.close()
    mode = os.lstat(path).st_mode
    return lambda: stat.S_IFMT(os.lstat(path).st_mode) == stat.S_IFMT(mode)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize("kind", KINDS)
def test_a_target_that_is_not_a_regular_file_is_refused_and_left_as_it_was(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "out.html"
    unchanged = make(kind, target)
    before = unchanged()
    with pytest.raises(UnsafeTarget) as raised:
        write_file(target, "<html>")
    assert str(target) in str(raised.value) and "nothing written" in str(raised.value)
    assert unchanged() == before
    assert leftovers(tmp_path) == []


def test_a_regular_file_or_a_new_path_is_written_whole_with_the_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        new = write_file(tmp_path / "sub" / "new.txt", "new")
        existing = tmp_path / "existing.txt"
        existing.write_text("old")
        write_file(existing, b"bytes")
    finally:
        os.umask(old)
    assert new.read_text() == "new" and existing.read_bytes() == b"bytes"
    assert stat.S_IMODE(new.stat().st_mode) == 0o644
    assert leftovers(tmp_path) == [] and leftovers(tmp_path / "sub") == []


def test_several_files_are_written_all_or_none(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "b.yaml")
    with pytest.raises(UnsafeTarget):
        write_files([(tmp_path / "a.yaml", "a"), (tmp_path / "b.yaml", "b")])
    assert not (tmp_path / "a.yaml").exists() and leftovers(tmp_path) == []


def test_a_failure_while_renaming_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space"):
        write_files([(tmp_path / "a.txt", "a"), (tmp_path / "b.txt", "b")])
    assert list(tmp_path.iterdir()) == []


def test_a_target_made_unsafe_while_staging_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check runs again just before the rename (a FIFO put there while the page was written)."""
    target = tmp_path / "page.html"
    real_fsync = os.fsync

    def fsync_then_fifo(fd: int) -> None:
        real_fsync(fd)
        if not target.exists():
            os.mkfifo(target)

    monkeypatch.setattr(os, "fsync", fsync_then_fifo)
    with pytest.raises(UnsafeTarget, match="is a FIFO"):
        write_file(target, "page")
    assert stat.S_ISFIFO(os.lstat(target).st_mode) and leftovers(tmp_path) == []


def test_check_target_names_each_kind(tmp_path: Path) -> None:
    for kind, says in zip(
        ("fifo", "directory", "dangling-symlink", "socket"),
        ("a FIFO", "a directory", "a symbolic link", "a socket"),
        strict=True,
    ):
        path = tmp_path / kind
        make(kind, path)
        with pytest.raises(UnsafeTarget, match=f"{path}: is {says}, not a regular file"):
            check_target(path)
    check_target(tmp_path / "absent")
    (tmp_path / "file").write_text("x")
    check_target(tmp_path / "file")
    with pytest.raises(UnsafeTarget, match="is a character device"):
        check_target(Path("/dev/null"))


# --- every command that writes a file ------------------------------------------------------------------


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    out = tmp_path / "proj"
    out.mkdir()
    for name in ("evaltrack.yaml", "gates", "scenarios", "rubrics", "judges", "examples"):
        src = PROJECT_ROOT / name
        if src.is_dir():
            shutil.copytree(src, out / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, out / name)
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_report_html_never_replaces_what_is_not_a_regular_file(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    assert (
        main(["--home", str(home), "build", "add", str(PROJECT_ROOT / "examples/builds/baseline.yaml")]) == 0
    )
    target = tmp_path / "report.html"
    unchanged = make(kind, target)
    before = unchanged()
    capsys.readouterr()
    assert main(["--home", str(home), "report", "agent-2026-11-28-base", "--html", str(target)]) == 1
    err = capsys.readouterr().err
    assert f"{target}: is " in err and len(err.strip().splitlines()) == 1
    assert unchanged() == before and leftovers(tmp_path) == []
    regular = tmp_path / "regular.html"
    assert main(["--home", str(home), "report", "agent-2026-11-28-base", "--html", str(regular)]) == 0
    assert regular.read_text(encoding="utf-8").startswith("<!doctype html>")


@pytest.mark.parametrize("kind", ["fifo", "dangling-symlink", "directory"])
def test_fixtures_record_refuses_an_unsafe_target_before_paying_anything(
    project_copy: Path, tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = project_copy / "gates/fixtures/models/rec.yaml"
    unchanged = make(kind, target)
    before = unchanged()
    home = tmp_path / "home"
    args = ["--case", "scripted-tool-loop", "--model", "sim/agent", "--name", "rec", "--force"]
    assert main(["--project", str(project_copy), "--home", str(home), "fixtures", "record", *args]) == 1
    assert f"{target}: is " in capsys.readouterr().err
    assert unchanged() == before and leftovers(target.parent) == []
    assert not (home / "journal.sqlite").exists()  # nothing paid


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
def test_trajectory_convert_refuses_an_unsafe_case_file_and_writes_nothing(
    project_copy: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    export = PROJECT_ROOT / "examples" / "trajectories" / "export.jsonl"
    out = project_copy.parent / "cases"  # outside the project: the planted file is no scenario it loads
    args = ["--project", str(project_copy), "trajectory", "convert", str(export), "--out", str(out)]
    assert main(args) == 0
    names = sorted(p.name for p in out.glob("*.yaml"))
    shutil.rmtree(out)
    out.mkdir()
    unchanged = make(kind, out / names[0])
    before = unchanged()
    capsys.readouterr()
    assert main(args) == 1
    assert f"{out / names[0]}: is " in capsys.readouterr().err
    assert unchanged() == before and sorted(p.name for p in out.glob("*.yaml")) == [names[0]]
    assert leftovers(out) == []


def test_init_refuses_a_symlinked_or_special_directory_argument(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    assert main(["init", str(link)]) == 1
    assert "is a symbolic link; nothing written" in capsys.readouterr().err and list(real.iterdir()) == []
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert main(["init", str(fifo)]) == 1 and stat.S_ISFIFO(os.lstat(fifo).st_mode)


# --- one writer: nothing in the package writes a file another way ----------------------------------------

# module -> why it may write without `safe_write` (a file of its own making, never a path a person names)
OWN_WRITERS = {
    "eval_assets/safe_write.py": "the one writer",
    "eval_assets/warehouse/_writer.py": "the partition writer (temp file, fsync, rename under the data directory)",
    "eval_assets/warehouse/_warehouse.py": "the catalog, quarantine moves and notes under the warehouse",
    "eval_assets/home.py": "the fence secret: an exclusive create published by a hard link, never over a file",
    "eval_assets/spend/_backends.py": "the journal's lock file, opened for a lock, never written",
    "eval_assets/cli/init_commands.py": "a rename inside the new, empty project directory",
    "eval_assets/cli/__init__.py": "the debug log, appended after check_target",
    "eval_assets/notify.py": "the notification log, appended after check_target",
    "eval_assets/cli/run_commands.py": "the debug log, appended after check_target",
    "eval_assets/agent_worker.py": "the attempt's result file, in the scratch directory the track made for it",
    "eval_assets/localmodel/_server.py": "the server's log and state file under EVAL_HOME",
    "eval_assets/localmodel/_weights.py": "the weights copied into EVAL_HOME (temp file, then rename)",
    "eval_assets/warehouse/_object.py": "checked local copies of catalogued objects under the warehouse",
}
WRITE_CALLS = {
    "write_text",
    "write_bytes",
    "replace",
    "rename",
    "mkstemp",
    "mkfifo",
    "symlink_to",
    "copytree",
}


def _writes(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name, owner = node.func.attr, node.func.value
            on_os = isinstance(owner, ast.Name) and owner.id in ("os", "tempfile", "shutil")
            mode = next((a.value for a in node.args if isinstance(a, ast.Constant)), None)
            if name in ("replace", "rename") and not (on_os or len(node.args) == 1):
                continue  # str.replace(old, new), dataclasses.replace(value, **changes)
            if isinstance(owner, ast.Name) and owner.id == "dataclasses":
                continue
            if (
                name in WRITE_CALLS
                or (on_os and name in ("open", "link"))
                or (on_os and name.startswith("copy"))
            ):
                found.append(f"{name}@{node.lineno}")
            elif name == "open" and isinstance(mode, str) and set(mode) & set("wax"):
                found.append(f"open({mode!r})@{node.lineno}")
    return found


def test_every_file_write_in_the_package_goes_through_safe_write_or_is_named_here() -> None:
    writers = {}
    for path in sorted((PROJECT_ROOT / "eval_assets").rglob("*.py")):
        rel = path.relative_to(PROJECT_ROOT).as_posix()
        found = _writes(ast.parse(path.read_text(encoding="utf-8")))
        if found:
            writers[rel] = found
    assert sorted(set(writers) - set(OWN_WRITERS)) == [], writers
