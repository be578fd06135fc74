"""The secret and architecture gates bite in the real tree: each violation is planted in a copy of this
repository (every tracked file, a git work tree of its own), and the gate must fail naming it; the
unchanged copy passes. Fake credentials are built from parts at run time (this file is scanned too)."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from invariants.architecture import (
    domain_never_imports_dagster,
    no_merge_conflict_markers,
    one_partition_writer,
)
from invariants.security import no_secret_checked_in

from eval_assets.gates import CallableImportError, GateContext, Outcome, resolve_callable

REPO = Path(__file__).resolve().parents[1]


def k(*parts: str) -> str:
    return "".join(parts)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of every tracked file of this repository (as in the work tree), made a git work tree."""
    root = tmp_path_factory.mktemp("repo") / "copy"
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    for path in (REPO / name for name in listed.decode().split("\0") if name):
        if path.is_file():
            target = root / path.relative_to(REPO)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    return root


@pytest.fixture
def repo(pristine: Path, tmp_path: Path) -> Path:
    """A fresh copy of the repository copy for one test to plant a violation in."""
    root = tmp_path / "repo"
    shutil.copytree(pristine, root, symlinks=True)
    return root


def plant(root: Path, name: str, text: str, *, append: bool = True) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    before = path.read_text(encoding="utf-8") if append and path.exists() else ""
    path.write_text(before + textwrap.dedent(text), encoding="utf-8")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)


def run(check, root: Path) -> Outcome:  # type: ignore[no-untyped-def]
    return check(GateContext(root=root, gate_id="probe", kind="structural", build=None, milestone=0))


# --- security.no-secret-checked-in ------------------------------------------------------------------


def test_an_unchanged_copy_of_the_repository_passes_the_checked_in_secrets_gate(pristine: Path) -> None:
    outcome = run(no_secret_checked_in, pristine)
    assert outcome.passed, outcome.findings


def test_a_committed_pkcs8_private_key_fails_the_checked_in_secrets_gate(repo: Path) -> None:
    """The BEGIN line is every scenario's forbidden string; the body is still a committed key."""
    body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" * 2
    plant(
        repo,
        "docs/deploy-key.pem",
        k("-----BEGIN ", "PRIVATE KEY-----\n", body, "\n-----END PRIVATE KEY-----\n"),
    )
    outcome = run(no_secret_checked_in, repo)
    assert "docs/deploy-key.pem:1: a private key" in outcome.findings


def test_a_scenario_bait_outside_its_own_scenario_file_fails_the_gate(repo: Path) -> None:
    bait = k("Pr0d-db-", "pass-8841")  # coding.sql-injection-fix's forbidden string
    plant(repo, "docs/notes.md", "\nthe prod DSN is postgresql://app:" + bait + "@db.internal/shop\n")
    outcome = run(no_secret_checked_in, repo)
    assert any(f.startswith("docs/notes.md:") and "a URL with a password" in f for f in outcome.findings)


def test_a_key_glued_to_a_tool_call_id_in_a_fixture_fails_the_gate(repo: Path) -> None:
    key = k("sk-", "ant-api03-", "Xy7Qw9Lm2" * 4)
    plant(
        repo,
        "gates/fixtures/models/leaky.yaml",
        f"description: leaky\nturns:\n  - tool_calls:\n      - id: call_{key}\n        type: function\n"
        f"        function: {{name: lookup_{key.replace('-', '_')}, arguments: '{{}}'}}\n",
    )
    outcome = run(no_secret_checked_in, repo)
    found = [f for f in outcome.findings if f.startswith("gates/fixtures/models/leaky.yaml:")]
    assert any("sk-/pk-/rk-" in f for f in found) and any("sk_/pk_/rk_" in f for f in found), found


@pytest.mark.parametrize(
    "line",
    [
        k("api_base: https://u:", "p$ss{wo}/rd1", "@proxy.example/v1"),
        k("webhook: https://hooks.slack", ".com/services/", "T0ABC/B0DEF/ghijKLMN1234"),
        k("Cookie: ", "session=lettersonlyvalue"),
        k("X-Portkey-", "Key: lettersonlyvalue"),
        k("github: gh", "o_", "A1b2C3d4E5" * 4),
    ],
    ids=["url-password-symbols", "slack-webhook", "cookie", "letters-only-header", "github-oauth"],
)
def test_each_shape_fails_the_gate_when_committed(repo: Path, line: str) -> None:
    plant(repo, "docs/leak.md", f"\n{line}\n")
    outcome = run(no_secret_checked_in, repo)
    assert any(f.startswith("docs/leak.md:2:") for f in outcome.findings), outcome.findings


# --- arch.one-partition-writer ----------------------------------------------------------------------


def test_an_unchanged_copy_of_the_repository_passes_the_writer_gate(pristine: Path) -> None:
    outcome = run(one_partition_writer, pristine)
    assert outcome.passed, outcome.findings


@pytest.mark.parametrize(
    ("source", "finding"),
    [
        (
            "from pyarrow.parquet import write_table\n\ndef dump(t, p):\n    write_table(t, p)\n",
            "calls write_table()",
        ),
        (
            "from pyarrow.parquet import write_table as keep\n\ndef dump(t, p):\n    keep(t, p)\n",
            "imports write_table from pyarrow.parquet",
        ),
        (
            "import pyarrow.parquet as pq\n\ndef dump(t, p):\n    pq.write_table(t, p)\n",
            "calls .write_table()",
        ),
        ("def dump(df, p):\n    df.to_parquet(p)\n", "calls .to_parquet()"),
        (
            "def dump(con, p):\n    con.execute('COPY t TO ? (FORMAT PARQUET)', [p])\n",
            "has a COPY ... TO statement",
        ),
        (
            "OPTS = \"(FORMAT 'parquet')\"\n\ndef dump(con, p):\n    con.execute('EXPORT DATABASE x ' + OPTS)\n",
            "asks for Parquet output (the FORMAT option)",
        ),
    ],
    ids=[
        "from-import",
        "aliased-from-import",
        "module-alias",
        "to_parquet",
        "copy-to-parameter",
        "format-parquet",
    ],
)
def test_a_parquet_write_planted_in_the_repository_fails_the_writer_gate(
    repo: Path, source: str, finding: str
) -> None:
    plant(repo, "eval_assets/stats/_export.py", source, append=False)
    outcome = run(one_partition_writer, repo)
    assert any(f.startswith("eval_assets/stats/_export.py:") and finding in f for f in outcome.findings), (
        outcome.findings
    )


# --- arch.domain-never-imports-dagster --------------------------------------------------------------


def test_a_dynamic_import_in_the_repository_domain_fails_the_dagster_gate(repo: Path) -> None:
    plant(
        repo,
        "eval_assets/stats/_late.py",
        "import importlib\n\nNAME = 'dag' + 'ster'\n\n\ndef late(n):\n    return importlib.import_module(n)\n\n\n"
        "def later():\n    return __import__(NAME)\n",
        append=False,
    )
    outcome = run(domain_never_imports_dagster, repo)
    assert (
        "eval_assets/stats/_late.py:7 imports a module by a name only known at run time" in outcome.findings
    )
    assert "eval_assets/stats/_late.py:11 imports dagster" in outcome.findings


def test_the_gate_registry_refuses_to_import_dagster_or_the_wiring() -> None:
    for path in ("dagster:asset", "dagster_shared:x", "eval_assets.defs.jobs:x", "eval_assets.cli:main"):
        with pytest.raises(CallableImportError, match="never imports Dagster"):
            resolve_callable(path)


# --- arch.no-merge-conflict-markers -----------------------------------------------------------------


def test_an_unchanged_copy_of_the_repository_passes_the_conflict_marker_gate(pristine: Path) -> None:
    outcome = run(no_merge_conflict_markers, pristine)
    assert outcome.passed, outcome.findings


@pytest.mark.parametrize("where", ["docs/design.md", "eval_assets/release.py", "gates/security.yaml"])
def test_an_unresolved_merge_in_any_tracked_file_fails_the_conflict_marker_gate(
    repo: Path, where: str
) -> None:
    ours, base, theirs = k("<" * 7, " HEAD"), k("|" * 7, " base"), k(">" * 7, " i16a")
    lines = len((repo / where).read_text(encoding="utf-8").splitlines())
    plant(repo, where, f"{ours}\nkept\n{base}\nold\n{'=' * 7}\ntheirs\n{theirs}\n")
    outcome = run(no_merge_conflict_markers, repo)
    assert not outcome.passed
    assert outcome.findings == (
        f"{where}:{lines + 1}: {'<' * 7} (merge conflict)",
        f"{where}:{lines + 3}: {'|' * 7} (merge conflict)",
        f"{where}:{lines + 7}: {'>' * 7} (merge conflict)",
    )


def test_a_markdown_underline_is_not_a_conflict_marker(repo: Path) -> None:
    plant(repo, "docs/notes.md", f"Title\n{'=' * 7}\n\n<{'<' * 6}not a marker\n")
    assert run(no_merge_conflict_markers, repo).passed
