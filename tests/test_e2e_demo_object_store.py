"""The whole `evaltrack demo` on the local directory and on object storage (moto's S3 server and a
throwaway PostgreSQL catalog on 127.0.0.1, started and stopped by the script): the same printed
output, the same current rows in every table (run ids, timestamps, timings and evidence's file names
aside) and the same decisions. SLOW: two demos; `benchmarks/demo_object_store.py` does the work and
exits 1 on any difference, naming it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pg import running_cluster
from shared import ROOT

pytestmark = pytest.mark.e2e


def test_the_demo_on_a_bucket_gives_the_local_directorys_output_rows_and_decisions(tmp_path: Path) -> None:
    with running_cluster("the demo on object storage"):  # fails (or skips loudly) without PostgreSQL
        pass
    done = subprocess.run(
        # its results into the test's own directory: the checked-in results file is a measured run's
        [sys.executable, str(ROOT / "benchmarks" / "demo_object_store.py"), "--out", str(tmp_path / "results.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    shown = "\n".join(line for line in done.stdout.splitlines() if "HTTP/1.1" not in line)
    assert done.returncode == 0, f"{shown}\n{done.stderr[-3000:]}"
    assert "DIFFERENT" not in shown and "decisions same" in shown, shown
