"""The architecture gates bite: each violation they exist for is planted in a small fixture package
(an `eval_assets` of a few modules under a temporary root) and the gate must fail naming it.

The shipped code passing both gates is checked by the dogfood suite (test_gates_runner.py).
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from eval_assets.gates import GateContext, Outcome
from eval_assets.gates.dogfood.architecture import (
    FORBIDDEN_EDGES,
    domain_never_imports_dagster,
    floors,
    import_graph,
    one_partition_writer,
)


def package(root: Path, modules: dict[str, str]) -> Path:
    """A fixture `eval_assets` package under `root`: the wiring module orchestrate.py imports Dagster,
    as the real one does; `modules` adds or replaces modules (path relative to the package)."""
    files = {
        "__init__.py": "",
        "orchestrate.py": "import dagster\n\n\ndef materialize():\n    return dagster.__name__\n",
        "clean.py": "import json\n\n\ndef dump(x):\n    return json.dumps(x)\n",
        "warehouse/_writer.py": "def write(con, path):\n    con.execute(f\"COPY t TO '{path}' (FORMAT parquet)\")\n",
        **modules,
    }
    for name, text in files.items():
        path = root / "eval_assets" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def run(check, root: Path) -> Outcome:  # type: ignore[no-untyped-def]
    return check(GateContext(root=root, gate_id="arch.probe", kind="structural", build=None, milestone=0))


# --- arch.domain-never-imports-dagster ----------------------------------------------------------------


def test_a_clean_fixture_package_passes_the_dagster_gate(tmp_path: Path) -> None:
    outcome = run(domain_never_imports_dagster, package(tmp_path, {}))
    assert outcome.passed, outcome.findings
    assert outcome.message.startswith("3 domain module(s): none imports dagster")


def test_dagster_reached_through_a_wiring_module_fails_the_gate(tmp_path: Path) -> None:
    """The domain module names no Dagster at all: it imports the wiring, which does."""
    root = package(tmp_path, {"report.py": "from eval_assets import orchestrate\n"})
    outcome = run(domain_never_imports_dagster, root)
    assert not outcome.passed
    assert "eval_assets/report.py:1 imports the wiring module eval_assets.orchestrate" in outcome.findings
    assert any(f.startswith("eval_assets.report: importing it loads dagster") for f in outcome.findings)
    assert not any("eval_assets.clean" in f for f in outcome.findings)


def test_dagster_imported_under_a_computed_name_is_caught_by_importing_the_module(tmp_path: Path) -> None:
    """No import statement names Dagster or the wiring: only importing the module shows it."""
    hidden = 'import importlib\n\nNAME = "dag" + "ster"\nimportlib.import_module(NAME)\n'
    root = package(tmp_path, {"sneaky.py": hidden, "uses_sneaky.py": "from eval_assets import sneaky\n"})
    outcome = run(domain_never_imports_dagster, root)
    assert not outcome.passed
    assert outcome.findings[0] == "eval_assets/sneaky.py:4 imports dagster"  # the name resolved statically
    assert [f.split(":")[0] for f in outcome.findings[1:]] == [
        "eval_assets.sneaky",
        "eval_assets.uses_sneaky",
    ]


def test_an_unchanged_tree_is_probed_once_per_process_and_a_changed_file_is_probed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo runs the suite for three builds in one process: the import probe (a fresh interpreter
    importing the whole domain) runs once for the same sources, and again once any file changes."""
    from eval_assets.gates.dogfood import architecture

    probes: list[list[str]] = []
    real_run = architecture.fresh_interpreter

    def counted(code, args, cwd, **kwargs):  # type: ignore[no-untyped-def]
        probes.append(list(args))
        return real_run(code, args, cwd, **kwargs)

    monkeypatch.setattr(architecture, "fresh_interpreter", counted)
    root = package(tmp_path, {})
    assert run(domain_never_imports_dagster, root).passed
    assert run(domain_never_imports_dagster, root).passed
    assert len(probes) == 1
    hidden = 'import importlib\n\nNAME = "dag" + "ster"\nimportlib.import_module(NAME)\n'
    (root / "eval_assets" / "clean.py").write_text(hidden, encoding="utf-8")  # no import statement to see
    outcome = run(domain_never_imports_dagster, root)
    assert len(probes) > 1  # probed again (a new interpreter for the modules after the one that failed)
    assert not outcome.passed
    assert any(f.startswith("eval_assets.clean: importing it loads dagster") for f in outcome.findings)


def test_a_probe_started_ahead_runs_beside_the_caller_and_the_gate_takes_its_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evaltrack run` starts the import probe before a build's steps: it runs in a background thread
    (its own interpreter on another core), the gate then takes its findings instead of probing again,
    and a file changed after the start is probed afresh (the findings are of the tree the gate sees)."""
    import threading

    from eval_assets.gates.dogfood import architecture

    threads: list[threading.Thread] = []  # the thread of each probe interpreter started (kept alive: distinct)
    real_run = architecture.fresh_interpreter

    def counted(code, args, cwd, **kwargs):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread())
        return real_run(code, args, cwd, **kwargs)

    monkeypatch.setattr(architecture, "fresh_interpreter", counted)
    hidden = 'import importlib\n\nNAME = "dag" + "ster"\nimportlib.import_module(NAME)\n'
    root = package(tmp_path, {"sneaky.py": hidden})
    architecture.start_import_probe(root)
    outcome = run(domain_never_imports_dagster, root)
    assert threads and all(t is threads[0] for t in threads)  # one probe: the one started ahead
    assert threads[0] is not threading.current_thread() and threads[0].name == "import-probe"
    assert any(f.startswith("eval_assets.sneaky: importing it loads dagster") for f in outcome.findings)

    architecture.start_import_probe(root)  # the same tree: nothing new is started
    probed = len(threads)
    assert run(domain_never_imports_dagster, root).findings == outcome.findings and len(threads) == probed
    (root / "eval_assets" / "sneaky.py").write_text(hidden + "# edited\n", encoding="utf-8")
    architecture.start_import_probe(root)  # a new tree, still bringing Dagster in: probed ahead
    (root / "eval_assets" / "sneaky.py").write_text("import json\n", encoding="utf-8")  # changed after the start
    assert run(domain_never_imports_dagster, root).passed  # not the findings of the tree probed ahead
    assert len({id(t) for t in threads[probed:]}) == 2  # the new tree's probe, and the gate's own


def test_a_wiring_module_imported_inside_a_domain_function_fails_the_gate(tmp_path: Path) -> None:
    lazy = "def publish():\n    from eval_assets.orchestrate import materialize\n    return materialize()\n"
    outcome = run(domain_never_imports_dagster, package(tmp_path, {"lazy.py": lazy}))
    assert not outcome.passed
    assert outcome.findings == ("eval_assets/lazy.py:2 imports the wiring module eval_assets.orchestrate",)


def test_a_relative_import_of_dagster_through_a_subpackage_fails_the_gate(tmp_path: Path) -> None:
    root = package(
        tmp_path,
        {"stats/__init__.py": "", "stats/plot.py": "from .. import orchestrate\n"},
    )
    outcome = run(domain_never_imports_dagster, root)
    assert "eval_assets/stats/plot.py:1 imports the wiring module eval_assets.orchestrate" in outcome.findings
    assert any(f.startswith("eval_assets.stats.plot: importing it loads dagster") for f in outcome.findings)


def test_a_domain_module_that_cannot_be_imported_fails_the_gate(tmp_path: Path) -> None:
    outcome = run(domain_never_imports_dagster, package(tmp_path, {"broken.py": "raise RuntimeError('x')\n"}))
    assert not outcome.passed
    assert outcome.findings == ("eval_assets.broken: could not be imported to check it: RuntimeError: x",)


# --- arch.one-partition-writer ------------------------------------------------------------------------


def test_a_clean_fixture_package_passes_the_writer_gate(tmp_path: Path) -> None:
    outcome = run(one_partition_writer, package(tmp_path, {}))
    assert outcome.passed, outcome.findings


@pytest.mark.parametrize(
    ("source", "finding"),
    [
        (
            "import pyarrow.parquet as pq\n\n\ndef w(t, p):\n    pq.ParquetWriter(p, t.schema).write(t)\n",
            "eval_assets/export.py:5 uses ParquetWriter",
        ),
        (
            "from pyarrow.parquet import ParquetWriter\n\n\ndef w(t, p):\n"
            "    with ParquetWriter(p, t.schema) as out:\n        out.write_table(t)\n",
            "eval_assets/export.py:1 imports ParquetWriter",
        ),
        ("def w(df, p):\n    df.to_parquet(p)\n", "eval_assets/export.py:2 calls .to_parquet()"),
        (
            'def w(con, p):\n    con.execute("CO" + "PY (SELECT 1) T" + "O \'" + p + "\'")\n',
            "eval_assets/export.py:2 has a COPY ... TO statement",
        ),
        (
            "def w(con, q, p):\n    head = 'COPY (' + q + ')'\n    con.execute(head + ' TO ' + p)\n",
            "eval_assets/export.py:3 has a COPY ... TO statement",
        ),
        (
            "def w(con, p):\n    con.execute(' '.join(['COPY', '(SELECT 1)', 'TO', repr(p)]))\n",
            "eval_assets/export.py:2 has a COPY ... TO statement",
        ),
        (
            "def w(con, p):\n    con.execute(f\"copy (select 1) to '{p}'\")\n",
            "eval_assets/export.py:2 has a COPY ... TO statement",
        ),
    ],
    ids=[
        "ParquetWriter-write",
        "ParquetWriter-import",
        "to_parquet",
        "COPY-split-by-plus",
        "COPY-via-name",
        "COPY-by-join",
        "COPY-fstring",
    ],
)
def test_a_parquet_write_outside_the_warehouse_fails_the_writer_gate(
    tmp_path: Path, source: str, finding: str
) -> None:
    outcome = run(one_partition_writer, package(tmp_path, {"export.py": source}))
    assert not outcome.passed
    assert finding in outcome.findings, outcome.findings
    assert not any("warehouse/_writer.py" in f for f in outcome.findings)  # the one writer may write


def test_a_file_changed_between_two_runs_in_one_process_is_read_again_by_the_writer_gate(
    tmp_path: Path,
) -> None:
    """The parsed trees are shared between checks and runs: a changed file must never be judged by its old tree."""
    root = package(tmp_path, {"export.py": "def export(frame, path):\n    return path\n"})
    assert run(one_partition_writer, root).passed
    (root / "eval_assets" / "export.py").write_text("def export(frame, path):\n    frame.to_parquet(path)\n")
    outcome = run(one_partition_writer, root)
    assert not outcome.passed
    assert any(f.startswith("eval_assets/export.py:2") for f in outcome.findings), outcome.findings


# --- arch.import-graph -------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]


def tree_copy(root: Path, planted: dict[str, str]) -> Path:
    """The shipped eval_assets/ (sources only) and docs/design.md under `root`, with `planted` lines appended to files
    (path relative to `root`; a file that does not exist is created)."""
    shutil.copytree(REPO / "eval_assets", root / "eval_assets", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "docs").mkdir(exist_ok=True)
    shutil.copy(REPO / "docs/design.md", root / "docs/design.md")  # the floors table
    for name, text in planted.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        before = path.read_text(encoding="utf-8") if path.exists() else ""
        path.write_text(before + textwrap.dedent(text), encoding="utf-8")
    return root


def test_the_shipped_tree_passes_the_import_graph_gate() -> None:
    outcome = run(import_graph, REPO)
    assert outcome.passed, outcome.findings
    assert "no cycle, none up the floors of docs/design.md, no private import across a package boundary" in outcome.message


def test_an_unchanged_copy_of_the_tree_passes_the_import_graph_gate(tmp_path: Path) -> None:
    outcome = run(import_graph, tree_copy(tmp_path, {}))
    assert outcome.passed, outcome.findings


def test_a_planted_cycle_fails_the_import_graph_gate(tmp_path: Path) -> None:
    """Two leaves that import each other (one of them inside a function) make a cycle of two."""
    root = tree_copy(
        tmp_path,
        {
            "eval_assets/clock.py": "\n\ndef _late():\n    import eval_assets.canonical\n",
            "eval_assets/canonical.py": "\nfrom eval_assets.clock import utc_now\n",
        },
    )
    outcome = run(import_graph, root)
    assert not outcome.passed
    assert outcome.findings == (
        "import cycle of 2 module(s): eval_assets.canonical -> eval_assets.clock; "
        "eval_assets.clock -> eval_assets.canonical",
    )


def test_a_planted_private_import_across_a_package_fails_the_import_graph_gate(tmp_path: Path) -> None:
    root = tree_copy(
        tmp_path,
        {
            "eval_assets/release.py": "from eval_assets.spend._journal import SpendJournal\n",
            "tests/test_planted.py": "from eval_assets.config._files import Problem\n",
            # inside its own package a private module is fine
            "eval_assets/spend/_planted.py": "from ._journal import SpendJournal\n",
        },
    )
    outcome = run(import_graph, root)
    assert not outcome.passed
    assert sorted(outcome.findings) == [
        f"eval_assets.release:{len((root / 'eval_assets/release.py').read_text().splitlines())} imports "
        "eval_assets.spend._journal, private to eval_assets.spend: use its face",
        "tests.test_planted:1 imports eval_assets.config._files, private to eval_assets.config: use its face",
    ]


def test_a_planted_forbidden_edge_fails_the_import_graph_gate(tmp_path: Path) -> None:
    """The converter asking a gate for its rule again: a forbidden edge, though it closes no cycle."""
    root = tree_copy(tmp_path, {"eval_assets/trajectory.py": "\nfrom eval_assets.gates import GateContext\n"})
    outcome = run(import_graph, root)
    line = len((root / "eval_assets/trajectory.py").read_text(encoding="utf-8").splitlines())
    assert not outcome.passed
    assert outcome.findings == (
        f"eval_assets.trajectory:{line} imports eval_assets.gates: forbidden (the raw-log rule lives in the domain)",
    )


def test_the_import_graph_gate_statement_lists_every_forbidden_edge() -> None:
    gates = yaml.safe_load((REPO / "gates/architecture.yaml").read_text(encoding="utf-8"))["gates"]
    (statement,) = [g["statement"] for g in gates if g["id"] == "arch.import-graph"]
    listed = [part.strip().rstrip(".") for part in statement.split(":", 1)[1].split(";") if "->" in part]
    assert listed == [f"{a} -> {b}" for a, b, _ in FORBIDDEN_EDGES]


def test_a_planted_import_up_the_floors_fails_the_import_graph_gate_even_inside_a_function(
    tmp_path: Path,
) -> None:
    """A statistics module (leaves) asking the release floor for a materialization closes no cycle
    and names no forbidden edge: only the floors catch it."""
    planted = "\n\ndef late():\n    from eval_assets.release import materialize_noise_bands\n"
    root = tree_copy(tmp_path, {"eval_assets/stats/_planted.py": planted})
    outcome = run(import_graph, root)
    assert not outcome.passed
    assert outcome.findings == (
        "eval_assets.stats._planted:4 imports eval_assets.release: up the floors (stats/ on leaves -> release.py on release)",
    )


def test_a_module_in_no_room_of_the_design_and_a_room_naming_no_module_fail_the_import_graph_gate(
    tmp_path: Path,
) -> None:
    root = tree_copy(tmp_path, {"eval_assets/latency.py": "VALUE = 1\n"})
    design = root / "docs/design.md"
    design.write_text(design.read_text().replace("`notify.py`, ", "`notify.py`, `gone.py`, "))
    outcome = run(import_graph, root)
    assert not outcome.passed
    assert outcome.findings == (
        "docs/design.md: room `gone.py` names no module",
        "eval_assets.latency: on no floor of docs/design.md's table: add its room to a floor",
    )


def test_without_the_design_floors_table_the_import_graph_gate_fails(tmp_path: Path) -> None:
    root = tree_copy(tmp_path, {})
    design = root / "docs/design.md"
    design.write_text(design.read_text().replace("| floor | rooms |", "| storey | rooms |"))
    outcome = run(import_graph, root)
    assert not outcome.passed
    assert outcome.findings[0].startswith("docs/design.md: no floors table")


def test_every_room_of_the_design_floors_table_is_on_exactly_one_floor() -> None:
    rooms = [room for _, named in floors(REPO) for room in named]
    assert [f for f, _ in floors(REPO)] == ["wiring", "release", "track", "run", "leaves"]
    assert len(rooms) == len(set(rooms))
