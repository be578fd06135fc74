"""An allow you can prove (issue 24): `release-status` exits 0 only when every input of the decision is
present, verified and current, and every check ran on the raw evidence.

One small decided home is built once (a baseline and its unchanged rebuild under one judge version,
a passing deterministic suite recorded, each decided through the track): the rebuild is `allow`.
Every test perturbs a copy of it and asks `release-status` in-process.
"""

from __future__ import annotations

import shutil
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared import changed_manifest, current_file, edit_in_place, record_one_gate_suite

from eval_assets import release
from eval_assets.capability.materialize import materialize_judge_verdicts, materialize_scenario_runs
from eval_assets.capability.track import Track
from eval_assets.cli import main
from eval_assets.config import RESERVED_IDS, Policy, Project, Scenario, id_problem
from eval_assets.home import EvalHome
from eval_assets.judging import policy_failures
from eval_assets.redact import redact

JUDGE = "helpfulness-v1"
# credential-looking labels, assembled so that no line of this file reads as a checked-in secret
TOKEN, SECRET = "to" + "ken", "sec" + "ret"
BASE, REBUILD = "agent-2026-11-28-base", "agent-2026-11-29-rebuild"


def decide(track: Track, build: str, run_id: str) -> str:
    summary = release.write_release_decision(
        track, build, run_id, lambda: [release.suite_evidence(track, build)]
    )
    return str(summary["decision"])


@pytest.fixture(scope="module")
def decided(tmp_path_factory: pytest.TempPathFactory, project: Project) -> Path:
    """A home where the baseline decided `none` (no baseline of its own) and the rebuild `allow`."""
    tmp = tmp_path_factory.mktemp("decided")
    home = EvalHome(tmp / "home").ensure()
    track = Track(project, home)
    for name in ("baseline.yaml", "rebuild.yaml"):
        build = track.register_build(changed_manifest(tmp, project, name, judges=[JUDGE])).id
        materialize_scenario_runs(track, build, f"runs-{build}")
        materialize_judge_verdicts(track, build, JUDGE, f"verdicts-{build}")
        release.materialize_noise_bands(track, build, JUDGE, f"bands-{build}")
        release.materialize_capability_report(track, build, JUDGE, f"report-{build}")
        record_one_gate_suite(track, build, failing=False, milestone=3, run_id=f"suite-{build}")
    assert decide(track, BASE, "decide-base") == "none"
    assert decide(track, REBUILD, "decide-rebuild") == "allow"
    return home.root


@pytest.fixture
def copy_home(decided: Path, tmp_path: Path) -> Callable[[str], Path]:
    def make(name: str = "home") -> Path:
        target = tmp_path / name
        shutil.copytree(decided, target, symlinks=True)
        return target

    return make


def status(home: Path, *args: str) -> int:
    return main(["--home", str(home), "release-status", *args])


def test_the_unperturbed_home_answers_allow_for_the_rebuild_and_none_for_the_baseline(
    copy_home: Callable[[str], Path],
) -> None:
    home = copy_home("home")
    assert status(home, REBUILD) == 0
    assert status(home, BASE) == 2


# --- the five paths of the issue ------------------------------------------------------------------


def _probe(policy: dict[str, Any]) -> Scenario:
    """A one-message scenario `probe` under `policy` (a Policy's fields), to ask `policy_failures` about."""
    return Scenario.model_validate(
        {
            "id": "probe",
            "suite": "probe",
            "description": "probe",
            "judge": "helpfulness",
            "input": [{"role": "user", "content": "hi"}],
            "policy": policy,
        }
    )


def test_path_1_a_leak_inside_credential_looking_text_counts_as_a_policy_failure() -> None:
    """The check runs on the raw text; the redaction would have hidden every one of these."""
    codes = ["NW-OVR-2291", "0c41e9aa", "FT-STAFF-90OFF"]
    scenario = _probe(Policy(forbidden_strings=codes).model_dump())
    for raw in (f"override {TOKEN}: NW-OVR-2291", f"{TOKEN}=0c41e9aa", f"{SECRET}: FT-STAFF-90OFF"):
        assert all(code not in redact(raw) for code in codes)  # stored: the code is gone
        assert policy_failures(raw, scenario) == 1  # judged: it is seen


def test_path_1_the_engine_counts_a_leak_the_redaction_hides_and_a_journal_reuse_keeps_the_count(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider answering "override token", a colon and NW-OVR-2291 through the real gateway: the stored text is
    redacted, the policy count is 1, and a second run reusing the journal's settled call counts 1 too
    (before the fix both were 0: the engine checked the redacted text)."""
    import asyncio
    import random

    from eval_assets.config import BuildManifest, EngineSettings
    from eval_assets.engine import Engine
    from eval_assets.providers.gateway import ModelGateway
    from eval_assets.spend import SpendPath, journal_url, open_journal

    try:
        from tests.openai_stub import Behaviour, OpenAIStub
    except ImportError:  # run from tests/
        from openai_stub import Behaviour, OpenAIStub  # type: ignore[no-redef]

    monkeypatch.setenv("OPENAI_API_KEY", "local-stub-needs-no-real-key")
    scenario = project.scenarios["support.refund-policy"]
    assert "NW-OVR-2291" in scenario.policy.forbidden_strings
    settings = EngineSettings(
        concurrency_per_model=4, timeout_s=5, max_tries=1, backoff_base_s=0.001, backoff_max_s=0.002
    )
    with OpenAIStub() as stub:
        stub.default = Behaviour.ok(f"Sure. The override {TOKEN}: NW-OVR-2291 will refund you.")
        build = BuildManifest.model_validate(
            {
                "id": "agent-leaky",
                "milestone": 1,
                "subject": {"model": "openai/gpt-4o-mini", "family": "openai", "api_base": stub.base_url},
            }
        )
        counts = []
        for run in ("first", "reuse"):
            journal = open_journal(journal_url(tmp_path))
            engine = Engine(
                SpendPath(journal, ModelGateway(), run_id=run), settings=settings, jitter=random.Random(0)
            )
            results = asyncio.run(engine.run_subjects(build, [scenario]))
            assert all(r.call.status == "ok" and "NW-OVR-2291" not in (r.call.text or "") for r in results)
            counts.append([r.policy_failures for r in results])
            assert (run == "reuse") == all(r.call.reused for r in results)
        assert len(stub.completion_requests) == scenario.repeats  # the reuse paid nothing
    assert counts == [[1] * scenario.repeats] * 2


def test_path_2_a_same_size_edit_of_the_decision_file_with_its_mtime_kept_exits_4(
    copy_home: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    home = copy_home("home")
    decision = current_file(home, "release_decisions", REBUILD)
    edit_in_place(decision, decision.stat().st_size // 2)
    assert status(home, REBUILD) == 4
    assert decision.name in capsys.readouterr().err


def test_path_3_a_lost_partition_manifest_fails_every_read_closed_until_an_explicit_rebuild(
    copy_home: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    home = copy_home("home")
    (home / "warehouse" / "partitions.sqlite").unlink()
    assert status(home, REBUILD) == 4
    assert "partitions.sqlite" in capsys.readouterr().err
    assert main(["--home", str(home), "warehouse", "verify"]) == 4
    assert main(["--home", str(home), "warehouse", "verify", "--rebuild"]) == 0
    out = capsys.readouterr().out
    assert "re-trusted: release_decisions/build=" in out
    assert status(home, REBUILD) == 0  # re-trusted on a person's word, and every hash still matches


def test_path_3_a_garbage_partition_manifest_exits_4(copy_home: Callable[[str], Path]) -> None:
    home = copy_home("home")
    (home / "warehouse" / "partitions.sqlite").write_bytes(b"not a database" * 100)
    for suffix in ("-wal", "-shm"):
        (home / "warehouse" / f"partitions.sqlite{suffix}").unlink(missing_ok=True)
    assert status(home, REBUILD) == 4


@pytest.mark.parametrize("argument", ["--help", "-h", ".", "..", "trend", "-x", "Agent", "a..b", "a/b"])
def test_path_4_an_argument_the_cli_could_misread_never_exits_0(
    copy_home: Callable[[str], Path], argument: str
) -> None:
    home = copy_home("home")
    with pytest.raises(SystemExit) as raised:  # argparse: help and unknown options end the parse
        code = status(home, argument)
        raise SystemExit(code)
    assert raised.value.code not in (0, None)


@pytest.mark.parametrize("bad", ["--help", ".", "..", "trend", "-a", "a..b", "A", "a" * 129, "ä"])
def test_path_4_the_id_grammar_refuses_option_like_dotted_and_reserved_ids(bad: str) -> None:
    assert id_problem(bad) is not None
    assert id_problem("agent-2026.11.29_rebuild") is None
    assert RESERVED_IDS >= {"trend"}


def test_path_4_a_manifest_with_an_option_like_id_is_refused_naming_the_field(
    tmp_path: Path, project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    path = changed_manifest(tmp_path, project, "rebuild.yaml")
    data = yaml.safe_load(path.read_text())
    for bad in ("--help", "..", "trend"):
        path.write_text(yaml.safe_dump({**data, "id": bad}))
        assert main(["--home", str(tmp_path / "h"), "build", "add", str(path)]) == 1
        assert f"{path}: id: {bad!r}" in capsys.readouterr().err


@pytest.mark.parametrize("pattern", ["h[o]me", "h?me", "h*", "h{o}me"])
def test_path_5_a_home_path_with_pattern_characters_is_read_literally(
    copy_home: Callable[[str], Path], pattern: str
) -> None:
    copy_home("home")  # the sibling a glob would match, with its intact allow
    home = copy_home(pattern)
    edit_in_place(current_file(home, "scenario_runs", REBUILD), 100)
    assert status(home, REBUILD) == 4  # its own damaged input, never the sibling's allow


# --- near misses --------------------------------------------------------------------------------------


def test_a_damaged_file_while_the_catalog_is_rebuilt_is_quarantined_and_other_builds_read_on(
    copy_home: Callable[[str], Path], project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    home = copy_home("home")
    (home / "warehouse" / "warehouse.duckdb").unlink()  # as after a move, a restore or an upgrade
    victim = current_file(home, "scenario_runs", BASE)
    victim.write_bytes(b"PAR1 truncated")
    track = Track(project, EvalHome(home))  # what `evaltrack run` (the documented repair) opens first
    assert (home / "warehouse" / "warehouse.duckdb").exists()
    runs = track.warehouse.query("SELECT build, count(*) AS n FROM scenario_runs GROUP BY 1")
    assert list(runs["build"]) == [REBUILD] and int(runs["n"].iloc[0]) > 0  # the others read on
    assert [d.file for d in track.warehouse.damage(BASE)] == [
        victim.relative_to(home / "warehouse/data").as_posix()
    ]
    assert status(home, REBUILD) == 4  # its baseline's input is damaged: named, never allow
    assert victim.name in capsys.readouterr().err


def test_registry_damage_is_an_internal_error_never_a_decision(copy_home: Callable[[str], Path]) -> None:
    home = copy_home("home")
    (home / "builds" / f"{REBUILD}.yaml").write_text("id: [unclosed\n")
    assert status(home, REBUILD) == 4
    home = copy_home("home2")
    (home / "builds" / f"{BASE}.yaml").unlink()  # the baseline the allow was decided against
    assert status(home, REBUILD) == 4
    home = copy_home("home3")
    (home / "builds" / f"{REBUILD}.yaml").unlink()  # the build itself, with its decision recorded
    assert status(home, REBUILD) == 4
    home = copy_home("home4")
    (home / "builds" / "agent-garbage.yaml").write_text("\x00\x01 not yaml")  # another build's damage
    assert status(home, REBUILD) == 0


def test_newer_gate_results_or_a_re_materialized_baseline_make_an_allow_stale(
    copy_home: Callable[[str], Path], project: Project
) -> None:
    home = copy_home("home")
    track = Track(project, EvalHome(home))
    # the gate results, written again after the decision
    record_one_gate_suite(track, REBUILD, failing=False, milestone=3, run_id=f"suite-{REBUILD}")
    assert status(home, REBUILD) == 2
    home = copy_home("home2")
    track = Track(project, EvalHome(home))
    release.materialize_noise_bands(track, BASE, JUDGE, "bands-again")  # the baseline's band, re-materialized
    assert status(home, REBUILD) == 2


def test_a_configuration_edited_after_the_decision_makes_an_allow_stale(
    copy_home: Callable[[str], Path], project: Project, tmp_path: Path
) -> None:
    """The decision was made on this checkout's configuration; a copy of it reads the same allow, and
    any edit of what decides (a scenario, a rubric, evaltrack.yaml) makes it stale, never allow."""
    home = copy_home("home")
    copy = tmp_path / "project"
    for part in ("evaltrack.yaml", "scenarios", "rubrics", "judges"):
        source = project.root / part
        copy.mkdir(exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy)(source, copy / part)
    at = ["--project", str(copy), "--home", str(home), "release-status", REBUILD]
    assert main(at) == 0
    scenario = next((copy / "scenarios").rglob("*.yaml"))
    original = scenario.read_text(encoding="utf-8")
    data = yaml.safe_load(original)
    scenario.write_text(
        yaml.safe_dump({**data, "description": data["description"] + " (edited)"}), encoding="utf-8"
    )
    assert main(at) == 2
    scenario.write_text(original, encoding="utf-8")
    assert main(at) == 0  # the same bytes again: current again
    settings = copy / "evaltrack.yaml"
    settings.write_text(
        settings.read_text(encoding="utf-8") + "\n# a comment is an edit too\n", encoding="utf-8"
    )
    assert main(at) == 2


def test_an_allow_rewritten_over_a_decision_whose_reasons_do_not_allow_it_exits_4(
    copy_home: Callable[[str], Path], project: Project
) -> None:
    """A decision file re-trusted by `warehouse verify --rebuild` after it was rewritten: the baseline's
    `none` turned into `allow`, run id and evidence kept, beside its own `none` reasons."""
    home = copy_home("home")
    track = Track(project, EvalHome(home))
    [row] = track.warehouse.query(
        "SELECT * EXCLUDE (written_at) FROM release_decisions WHERE build = ?", [BASE]
    ).to_dict("records")
    run_id = row.pop("run_id")
    track.warehouse.write_partition(
        "release_decisions", {"build": BASE}, [{**row, "decision": "allow"}], run_id
    )
    assert status(home, BASE) == 4
    assert status(home, REBUILD) == 0  # a real allow (its reasons all info) still reads as allow


def test_a_decision_recorded_without_evidence_is_stale(
    copy_home: Callable[[str], Path], project: Project
) -> None:
    home = copy_home("home")
    track = Track(project, EvalHome(home))
    frame = track.warehouse.query(
        "SELECT * EXCLUDE (run_id, written_at) FROM release_decisions WHERE build = ?", [REBUILD]
    )
    rows = [{**r, "evidence": None} for r in frame.to_dict("records")]
    rows[0]["reasons"] = "\n".join(str(x) for x in [])  # as an older release wrote it
    rows[0]["judge_versions"] = JUDGE
    track.warehouse.write_partition("release_decisions", {"build": REBUILD}, rows, "older-release")
    assert status(home, REBUILD) == 2


# --- the standing rule: no perturbation ever reads as allow -------------------------------------------

INPUTS = (
    "scenario_runs",
    "judge_verdicts",
    "noise_bands",
    "gate_results",
    "release_decisions",
    "release_decision_reasons",
)


@st.composite
def perturbations(draw: st.DrawFn) -> tuple[str, Callable[[Path], None]]:
    family = draw(st.sampled_from(["edit", "delete-file", "registry", "manifest", "pattern-home"]))
    if family == "edit":
        table = draw(st.sampled_from(INPUTS))
        build = draw(st.sampled_from([REBUILD, BASE])) if table not in INPUTS[-2:] else REBUILD
        offset = draw(st.integers(min_value=0, max_value=1 << 20))
        return f"edit {table}[{build}]@{offset}", lambda h: edit_in_place(
            current_file(h, table, build), offset
        )
    if family == "delete-file":
        table = draw(st.sampled_from(INPUTS))
        build = draw(st.sampled_from([REBUILD, BASE])) if table not in INPUTS[-2:] else REBUILD
        return f"delete {table}[{build}]", lambda h: current_file(h, table, build).unlink()
    if family == "registry":
        build = draw(st.sampled_from([REBUILD, BASE]))
        garbage = draw(st.sampled_from([None, "", "id: [", "\x00", "id: other\nmilestone: 1\n"]))

        def registry(h: Path) -> None:
            path = h / "builds" / f"{build}.yaml"
            if garbage is None:
                path.unlink()
            else:
                path.write_text(garbage)

        return f"registry {build} -> {garbage!r}", registry
    if family == "manifest":
        garbage = draw(st.sampled_from([None, b"", b"garbage" * 50]))

        def manifest(h: Path) -> None:
            path = h / "warehouse" / "partitions.sqlite"
            for suffix in ("-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            if garbage is None:
                path.unlink()
            else:
                path.write_bytes(garbage)

        return f"partition manifest -> {garbage!r}", manifest
    offset = draw(st.integers(min_value=0, max_value=1 << 20))
    return f"pattern home, edited runs @{offset}", lambda h: edit_in_place(
        current_file(h, "scenario_runs", REBUILD), offset
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(perturbation=perturbations(), name=st.text(alphabet="[]?*{}ab", min_size=1, max_size=6))
def test_release_status_never_exits_0_for_any_perturbation(
    decided: Path,
    tmp_path_factory: pytest.TempPathFactory,
    perturbation: tuple[str, Callable[[Path], None]],
    name: str,
) -> None:
    what, apply = perturbation
    parent = tmp_path_factory.mktemp("perturbed")
    home = parent / "copy"
    if what.startswith("pattern"):
        shutil.copytree(decided, parent / "home")  # an intact sibling a glob could reach
        home = parent / ("h" + name)
    shutil.copytree(decided, home)
    apply(home)
    assert status(home, REBUILD) != 0, what


@settings(max_examples=200, deadline=None)
@given(
    before=st.text(alphabet=string.printable, max_size=40),
    after=st.text(alphabet=string.printable, max_size=40),
    label=st.sampled_from(
        ["token", "secret", "password", "api_key", "Authorization: Bearer", "override token"]
    ),
    sep=st.sampled_from(["=", ": ", " = ", ":"]),
    encode=st.sampled_from(["plain", "lower", "url", "json", "html", "base64", "zero-width"]),
)
def test_a_forbidden_string_in_any_context_and_encoding_is_counted_on_the_raw_text(
    before: str, after: str, label: str, sep: str, encode: str
) -> None:
    import base64
    import urllib.parse

    code = "NW-OVR-2291"
    shown = {
        "plain": code,
        "lower": code.lower(),
        "url": urllib.parse.quote(code, safe=""),
        "json": "".join(f"\\u{ord(c):04x}" for c in code),
        "html": "".join(f"&#{ord(c)};" for c in code),
        "base64": base64.b64encode(f" {code} ".encode()).decode(),
        "zero-width": "\u200b".join(code),
    }[encode]
    scenario = _probe({"forbidden_strings": [code]})
    raw = f"{before} {label}{sep}{shown} {after}"
    assert policy_failures(raw, scenario) == 1, raw


# --- the same rule on object storage (issue 49): objects edited, deleted, replaced, dropped beside -----
#
# One decided state is made on an S3-compatible bucket (moto's server) with its catalog in PostgreSQL,
# through a copy of the project whose evaltrack.yaml names them; each case restores it (the bucket's
# objects copied back from a golden prefix, the catalog database re-created from a golden template),
# perturbs it and asks `release-status` in-process. The same families run on the local directory.

OBJECT_FAMILIES = ("edit", "delete", "older", "stranger")


class ObjectDecided:
    """The decided state on the object store, restorable between cases."""

    def __init__(self, tmp: Path, project: Project):
        from object_store import ObjectBackend

        from eval_assets.config import load_project

        self.backend = ObjectBackend()
        self.env = pytest.MonkeyPatch()
        for name, value in self.backend.s3.environment().items():
            self.env.setenv(name, value)
        self.url = f"{self.backend.bucket}/live"
        self.catalog = self.backend.pg.url("live")
        self._admin("CREATE DATABASE live")
        self.project_dir = tmp / "project"
        self.project_dir.mkdir()
        for part in ("evaltrack.yaml", "scenarios", "rubrics", "judges", "examples", "gates"):
            source = project.root / part
            (shutil.copytree if source.is_dir() else shutil.copy)(source, self.project_dir / part)
        with (self.project_dir / "evaltrack.yaml").open("a", encoding="utf-8") as f:
            f.write(f"\nwarehouse:\n  url: {self.url}\n  catalog: {self.catalog}\n")
        self.project = load_project(self.project_dir)
        self.home = tmp / "home"
        track = Track(self.project, EvalHome(self.home).ensure())
        for name in ("baseline.yaml", "rebuild.yaml"):
            build = track.register_build(changed_manifest(tmp, self.project, name, judges=[JUDGE])).id
            materialize_scenario_runs(track, build, f"runs-{build}")
            materialize_judge_verdicts(track, build, JUDGE, f"verdicts-{build}")
            release.materialize_noise_bands(track, build, JUDGE, f"bands-{build}")
            release.materialize_capability_report(track, build, JUDGE, f"report-{build}")
            record_one_gate_suite(track, build, failing=False, milestone=3, run_id=f"suite-{build}")
        assert decide(track, BASE, "decide-base") == "none"
        assert decide(track, REBUILD, "decide-rebuild") == "allow"
        track.warehouse.close()  # type: ignore[attr-defined]
        fs, base = self.fs_base()
        for key in self.keys("live"):
            fs.copy_file(f"{base}/live/{key}", f"{base}/golden/{key}")
        self._admin("CREATE DATABASE golden TEMPLATE live", terminate="live")

    def fs_base(self) -> tuple[Any, str]:
        from eval_assets.warehouse import Bucket

        bucket = Bucket(self.backend.bucket)
        return bucket.fs, bucket.base

    def keys(self, prefix: str) -> list[str]:
        from pyarrow import fs as pafs

        fs, base = self.fs_base()
        root = f"{base}/{prefix}/"
        infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
        return [i.path[len(root) :] for i in infos if i.type == pafs.FileType.File]

    def _admin(self, sql: str, terminate: str | None = None) -> None:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.backend.pg.port, user="postgres", dbname="postgres", autocommit=True
        ) as c:
            if terminate:
                c.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                    "AND pid <> pg_backend_pid()",
                    [terminate],
                )
            c.execute(sql)  # type: ignore[arg-type]

    def restore(self, target: Path) -> Path:
        """The decided state again: bucket objects, catalog and a copy of the home at `target`."""
        fs, base = self.fs_base()
        fs.delete_dir_contents(f"{base}/live", missing_dir_ok=True)
        for key in self.keys("golden"):
            fs.copy_file(f"{base}/golden/{key}", f"{base}/live/{key}")
        self._admin("DROP DATABASE IF EXISTS live WITH (FORCE)")
        self._admin("CREATE DATABASE live TEMPLATE golden")
        shutil.copytree(self.home, target, symlinks=True)
        return target

    def status(self, home: Path, build: str = REBUILD) -> int:
        return main(["--project", str(self.project_dir), "--home", str(home), "release-status", build])

    def stop(self) -> None:
        self.env.undo()
        self.backend.stop()


@pytest.fixture(scope="module")
def object_decided(tmp_path_factory: pytest.TempPathFactory, project: Project) -> Any:
    from pg import running_cluster

    with running_cluster("decision integrity on object storage"):  # fails (or skips loudly) without it
        pass
    state = ObjectDecided(tmp_path_factory.mktemp("object-decided"), project)
    try:
        yield state
    finally:
        state.stop()


def _warehouse_of(kind: str, home: Path, state: Any) -> Any:
    from eval_assets.warehouse import Warehouse

    if kind == "local":
        return Warehouse(home / "warehouse")
    from eval_assets.warehouse import ObjectWarehouse

    return ObjectWarehouse(home / "warehouse", state.url, state.catalog)


def perturb_object(wh: Any, family: str, table: str, build: str, offset: int) -> str:
    """Apply one object perturbation to the current file of `table`'s partition of `build`; returns
    the name of the file it touched (what `release-status` should name)."""
    from object_store import Objects

    files = Objects(wh)
    [entry] = [e for e in wh.current_files([table], [build]).values() if _applies(e, {JUDGE})]
    rel = entry.path
    data = files.read(rel)
    if family == "edit":  # one byte flipped, the size kept
        files.write(
            rel,
            data[: offset % len(data)]
            + bytes([data[offset % len(data)] ^ 1])
            + data[offset % len(data) + 1 :],
        )
    elif family == "delete":
        files.delete(rel)
    elif family == "older":  # another catalogued version of the same table put back in its place
        other = sorted(
            e.path
            for e in wh._entries()
            if e.dataset == table
            and e.path != rel
            and e.state == "written"
            and e.sha256 != entry.sha256
            and "/_schema/" not in e.path
        )
        files.write(rel, files.read(other[offset % len(other)]))
    else:  # an uncatalogued copy dropped beside it, named newer
        rel = rel.rsplit("/", 1)[0] + f"/{entry.written_at_ns + 1 + offset}-stranger.parquet"
        files.write(rel, data)
    if hasattr(wh, "close"):
        wh.close()
    return rel.rsplit("/", 1)[-1]


def _applies(entry: Any, versions: set[str]) -> bool:
    judge_version = entry.partition.get("judge_version")
    return judge_version is None or judge_version in versions


def test_the_unperturbed_object_store_answers_allow_for_the_rebuild(
    object_decided: Any, tmp_path: Path
) -> None:
    home = object_decided.restore(tmp_path / "home")
    assert object_decided.status(home) == 0
    assert object_decided.status(home, BASE) == 2


@pytest.mark.parametrize("kind", ["local", "object"])
@pytest.mark.parametrize("family", OBJECT_FAMILIES)
def test_each_object_perturbation_of_the_decision_file_exits_4_naming_it(
    kind: str,
    family: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if kind == "local":
        state = None
        home = request.getfixturevalue("copy_home")("home")
        status_of: Callable[[Path], int] = lambda h: status(h, REBUILD)  # noqa: E731
    else:
        state = request.getfixturevalue("object_decided")
        home = state.restore(tmp_path / "home")
        status_of = state.status
    name = perturb_object(_warehouse_of(kind, home, state), family, "release_decisions", REBUILD, 1000)
    assert status_of(home) == 4
    assert name in capsys.readouterr().err


@st.composite
def object_perturbations(draw: st.DrawFn) -> tuple[str, str, str, int]:
    family = draw(st.sampled_from(OBJECT_FAMILIES))
    table = draw(st.sampled_from(INPUTS))
    build = draw(st.sampled_from([REBUILD, BASE])) if table not in INPUTS[-2:] else REBUILD
    return family, table, build, draw(st.integers(min_value=0, max_value=1 << 20))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(perturbation=object_perturbations(), kind=st.sampled_from(["local", "object"]))
def test_release_status_never_exits_0_for_any_object_perturbation(
    decided: Path,
    object_decided: Any,
    tmp_path_factory: pytest.TempPathFactory,
    perturbation: tuple[str, str, str, int],
    kind: str,
) -> None:
    family, table, build, offset = perturbation
    target = tmp_path_factory.mktemp("object-perturbed") / "home"
    if kind == "local":
        shutil.copytree(decided, target)
        home, status_of = target, (lambda h: status(h, REBUILD))
    else:
        home, status_of = object_decided.restore(target), object_decided.status
    perturb_object(_warehouse_of(kind, home, object_decided), family, table, build, offset)
    assert status_of(home) != 0, (kind, perturbation)
