"""The test harness itself (tests/conftest.py): what one test leaves in its process never reaches the next.

xdist runs many tests one after another in each worker process, so state a test leaves in the
process decides whether a later one passes: the failures then depend on the order. Each test here
runs a small inner pytest session, in its own process, with a copy of the shared conftest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from eval_assets.home import PROJECT_ROOT

CONFTEST = Path(__file__).with_name("conftest.py")

# The first test exits two entered instances in the wrong order, as the garbage collector does when it
# finalizes sensor test contexts that were never exited (each opened an instance from a ref): the last
# exit restores the context variable to the first instance's defs-state storage, whose instance is
# gone. The second test loads the code location's definitions, as a materialization does.
LEAK_THEN_LOAD = """
import gc

import dagster as dg


def test_1_exits_two_instances_out_of_order():
    first, second = dg.DagsterInstance.local_temp(), dg.DagsterInstance.local_temp()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    second.__exit__(None, None, None)
    del first, second
    gc.collect()


def test_2_loads_the_code_location():
    from eval_assets.definitions import defs

    assert defs().resolve_job_def("capability_track") is not None
"""


def test_an_instance_context_a_test_leaves_open_does_not_break_a_later_definitions_load(
    tmp_path: Path,
) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "test_leak.py").write_text(LEAK_THEN_LOAD)
    env = {**os.environ, "EVAL_PROJECT_ROOT": str(PROJECT_ROOT), "EVAL_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:randomly",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_leak.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "2 passed" in proc.stdout
