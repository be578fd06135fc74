"""The docs' measured tables are rendered from benchmarks/results/ by scripts/render_results: a table edited by
hand, or left behind by a new run, fails the test command; every benchmark writes its results through the
one helper, benchmarks/_results.py."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "render_results"
# helpers of the benchmarks, not benchmarks: the results writer itself and the HTTP stand-in a benchmark starts
NOT_BENCHMARKS = {"_results.py", "openai_stand_in.py"}


def render(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root), *args], capture_output=True, text=True, timeout=60
    )


def copy_of_docs(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", root / "docs")
    shutil.copytree(ROOT / "benchmarks" / "results", root / "benchmarks" / "results")
    return root


def test_every_measured_table_in_the_docs_matches_its_results_file() -> None:
    done = render(ROOT, "--check")
    assert done.returncode == 0, done.stderr + "\nrun `python3 scripts/render_results`"
    rendered = [p for p in (ROOT / "docs").rglob("*.md") if "<!-- results:" in p.read_text(encoding="utf-8")]
    assert rendered, "no doc renders a measured table"


def test_a_figure_edited_by_hand_in_a_doc_is_stale(tmp_path: Path) -> None:
    root = copy_of_docs(tmp_path)
    doc = root / "docs" / "mutation.md"
    text = doc.read_text(encoding="utf-8")
    assert "| 100.0% |" in text
    doc.write_text(text.replace("| 100.0% |", "| 99.0% |", 1), encoding="utf-8")
    done = render(root, "--check")
    assert done.returncode == 1
    assert "docs/mutation.md: results:mutation#scores" in done.stderr
    assert doc.read_text(encoding="utf-8") != text, "--check wrote the file"


def test_a_new_run_makes_the_table_stale_until_rendered(tmp_path: Path) -> None:
    root = copy_of_docs(tmp_path)
    results = root / "benchmarks" / "results" / "mutation.json"
    data = json.loads(results.read_text(encoding="utf-8"))
    data["tables"]["scores"][0]["killed"] = 146
    results.write_text(json.dumps(data), encoding="utf-8")
    assert render(root, "--check").returncode == 1
    assert render(root).returncode == 0
    assert render(root, "--check").returncode == 0
    assert "| 146 |" in (root / "docs" / "mutation.md").read_text(encoding="utf-8")


def test_a_marker_with_no_results_file_behind_it_fails_closed(tmp_path: Path) -> None:
    root = copy_of_docs(tmp_path)
    (root / "docs" / "extra.md").write_text("<!-- results:never_measured -->\n| a |\n<!-- /results -->\n")
    for args in (("--check",), ()):
        done = render(root, *args)
        assert done.returncode != 0
        assert "docs/extra.md: results:never_measured" in done.stderr + done.stdout


def test_every_benchmark_records_its_results_through_the_one_helper() -> None:
    missing = []
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        if path.name in NOT_BENCHMARKS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imports = any(
            isinstance(node, ast.ImportFrom) and node.module == "_results"
            or isinstance(node, ast.Import) and any(alias.name == "_results" for alias in node.names)
            for node in ast.walk(tree)
        )
        calls = {
            node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name)
        }
        records = {"Recording", "write"} <= calls
        if not (imports and records):
            missing.append(path.name)
    assert missing == [], "these benchmarks write no benchmarks/results/<name>.json through benchmarks/_results.py"
