"""An allow you can prove (issue 24): `release-status` exits 0 only when every input of the decision is
present, verified and current, and every check ran on the raw evidence.

One small decided home is built once (a baseline and its unchanged rebuild under one judge version,
a passing deterministic suite recorded, each decided through the track): the rebuild is `allow`.
Every test perturbs a copy of it and asks `release-status` in-process.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import string
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared import ROOT, changed_manifest, current_file, edit_in_place, record_one_gate_suite

from eval_assets import release
from eval_assets.capability.materialize import materialize_judge_verdicts, materialize_scenario_runs
from eval_assets.capability.track import Track
from eval_assets.cli import main
from eval_assets.config import RESERVED_IDS, Policy, Project, Scenario, id_problem, load_project
from eval_assets.home import EvalHome
from eval_assets.judging import policy_failures
from eval_assets.providers import ModelScript
from eval_assets.providers.gateway import ModelGateway
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
    assert status(home, REBUILD) == 2  # re-trusted on a person's word: stale until decided again


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


# --- a decision is bound to its build and its whole evidence (issue 45, wrong allow 4) ----------------


def _files_of(home: Path, table: str, build: str) -> list[Path]:
    return sorted((home / "warehouse" / "data" / table / f"build={build}").glob("*.parquet"))


def copy_decision(
    home: Path, source: str, target: str, *, drop_own: bool = False, stamp: int | None = None
) -> None:
    """Copy `source`'s current decision and reasons files into `target`'s partitions, as bytes (no
    writer), optionally deleting `target`'s own first; `stamp`: the copies' file-name time."""
    for table in ("release_decisions", "release_decision_reasons"):
        file = current_file(home, table, source)
        into = home / "warehouse" / "data" / table / f"build={target}"
        if drop_own:
            for own in _files_of(home, table, target):
                own.unlink()
        into.mkdir(parents=True, exist_ok=True)
        name = file.name if stamp is None else f"{stamp}-{file.name.split('-', 1)[1]}"
        shutil.copy2(file, into / name)


def retrust(home: Path, manifest: str) -> int:
    """`warehouse verify --rebuild` with the partition manifest `healthy`, `deleted` or `garbage`."""
    path = home / "warehouse" / "partitions.sqlite"
    if manifest != "healthy":
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        path.unlink()
        if manifest == "garbage":
            path.write_bytes(b"garbage" * 50)
    return main(["--home", str(home), "warehouse", "verify", "--rebuild"])


@pytest.mark.parametrize("manifest", ["healthy", "deleted", "garbage"])
def test_another_builds_allow_copied_in_and_re_trusted_never_reads_as_allow(
    copy_home: Callable[[str], Path], manifest: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's reproduction: the rebuild's decision files copied into the baseline's partitions,
    then `warehouse verify --rebuild` (before: the baseline read allow, exit 0)."""
    home = copy_home("home")
    copy_decision(home, REBUILD, BASE, stamp=time.time_ns())
    code = retrust(home, manifest)
    out = capsys.readouterr()
    if manifest == "healthy":  # nothing re-trusted: the copies are damage, set aside and named
        assert code == 4 and "healthy: nothing re-trusted" in out.err
        assert "re-trusted:" not in out.out
    else:
        assert code == 0 and f"re-trusted: release_decisions/build={BASE}/" in out.out
    assert status(home, BASE) not in (0,)
    assert status(home, REBUILD) != 0 or manifest == "healthy"


def test_a_decision_row_of_another_build_is_damage(copy_home: Callable[[str], Path]) -> None:
    home = copy_home("home")
    copy_decision(home, REBUILD, BASE, drop_own=True)
    retrust(home, "deleted")
    # re-trusted files read as stale at best; the row names another build: damage, named
    assert status(home, BASE) == 4


def test_a_decision_whose_evidence_does_not_name_its_own_build_is_damage(
    copy_home: Callable[[str], Path], project: Project
) -> None:
    """The rebuild's allow written through the writer under the baseline's name, its evidence kept."""
    home = copy_home("home")
    track = Track(project, EvalHome(home))
    for table in ("release_decisions", "release_decision_reasons"):
        rows = track.warehouse.query(
            f"SELECT * EXCLUDE (run_id, written_at) FROM {table} WHERE build = ?", [REBUILD]
        ).to_dict("records")
        track.warehouse.write_partition(
            table, {"build": BASE}, [{**r, "build": BASE} for r in rows], "copied"
        )
    assert status(home, BASE) == 4


def test_a_re_trust_makes_every_earlier_decision_stale_until_decided_again(
    copy_home: Callable[[str], Path], project: Project
) -> None:
    home = copy_home("home")
    assert retrust(home, "deleted") == 0
    assert status(home, REBUILD) == 2
    assert status(home, BASE) == 2
    track = Track(project, EvalHome(home))
    assert decide(track, REBUILD, "decide-again") == "allow"
    assert status(home, REBUILD) == 0  # a new decision, written by the writer, on the re-trusted inputs


def test_an_unchanged_rebuild_of_the_baseline_registered_after_the_decision_makes_it_stale(
    copy_home: Callable[[str], Path], project: Project, tmp_path: Path
) -> None:
    """Registered alone it changes nothing a decision reads; once it has verdicts (which widen the
    baseline's band) the decision that did not read them is stale."""
    home = copy_home("home")
    track = Track(project, EvalHome(home))
    second = "agent-2026-11-30-rebuild2"
    track.register_build(changed_manifest(tmp_path, project, "rebuild.yaml", id=second, judges=[JUDGE]))
    assert status(home, REBUILD) == 0
    rows = track.warehouse.rows(
        "SELECT * EXCLUDE (run_id, written_at) FROM judge_verdicts WHERE build = ?", [REBUILD]
    )
    track.warehouse.write_partition(
        "judge_verdicts",
        {"build": second, "judge_version": JUDGE},
        [{**r, "build": second} for r in rows],
        "verdicts-2",
    )
    assert status(home, REBUILD) == 2
    assert status(home, BASE) == 2  # the baseline decided with no baseline of its own: none, as before


# --- the standing rule: no perturbation ever reads as allow -------------------------------------------

INPUTS = (
    "scenario_runs",
    "judge_verdicts",
    "noise_bands",
    "gate_results",
    "release_decisions",
    "release_decision_reasons",
)


Perturbation = tuple[str, Callable[[Path], Path | None]]
"""(what, apply(home)): `apply` perturbs the home; it returns the project directory `release-status`
is asked under when the perturbation edited a copy of the configuration (None: this checkout)."""


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


def _project_copy(target: Path) -> Path:
    """A copy of this checkout's configuration (what `release-status --project` reads) at `target`."""
    for part in ("evaltrack.yaml", "scenarios", "rubrics", "judges"):
        source = ROOT / part
        target.mkdir(exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target / part)
    return target


FAMILIES: tuple[st.SearchStrategy[Perturbation], ...] = (
    # damage to the decided home (issue 24): a copy and a status, 0.2 s; drawn 4 times in 6
    *[perturbations()] * 4,
    # issue 45 (a run and a decision each, about 4 s): a leak in any turn or tool argument, any form;
    # the policy edited after the run
    st.deferred(lambda: policy_leaks()),
    st.deferred(lambda: policies_edited_after_the_run()),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(perturbation=st.one_of(FAMILIES), name=st.text(alphabet="[]?*{}ab", min_size=1, max_size=6))
def test_release_status_never_exits_0_for_any_perturbation(
    decided: Path,
    tmp_path_factory: pytest.TempPathFactory,
    perturbation: Perturbation,
    name: str,
) -> None:
    what, apply = perturbation
    parent = tmp_path_factory.mktemp("perturbed")
    home = parent / "copy"
    if what.startswith("pattern"):
        shutil.copytree(decided, parent / "home")  # an intact sibling a glob could reach
        home = parent / ("h" + name)
    shutil.copytree(decided, home)
    project = apply(home)
    asked = ["--project", str(project or ROOT)]  # `--project` stays in force in this process: name it
    assert main([*asked, "--home", str(home), "release-status", REBUILD]) != 0, what


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


# --- families of issue 45: a leak in any turn or tool argument, a policy edited after the run ----------
# (each a strategy of its own, drawn by `test_release_status_never_exits_0_for_any_perturbation`)

LEAK_SCENARIO, LEAK = "support.refund-policy", "NW-OVR-2291"  # the scenario forbids the code


def _json_escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" if not c.isalnum() else c for c in text)


def _mime(text: str) -> str:
    encoded = base64.b64encode(f"note: {text} (keep it)".encode() * 4).decode()
    return "\n".join(encoded[i : i + 20] for i in range(0, len(encoded), 20))


def _invisible(mark: str) -> Callable[[str], str]:
    return lambda text: mark.join(text)


LEAK_FORMS: dict[str, Callable[[str], str]] = {
    "plain": lambda t: t,
    "lower": str.lower,
    "fullwidth": lambda t: "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in t),
    "confusable": lambda t: t.replace("O", "\u041e").replace("N", "\u039d"),  # Cyrillic O, Greek Nu
    "url": lambda t: urllib.parse.quote(t, safe=""),
    "json": _json_escaped,
    "html": lambda t: "".join(f"&#x{ord(c):x};" for c in t),
    "quoted-printable": lambda t: "".join(f"={ord(c):02X}" for c in t),
    "hex": lambda t: t.encode().hex(),
    "base64": lambda t: base64.b64encode(f" {t} ".encode()).decode(),
    "base64-url-glued": lambda t: "ref" + base64.urlsafe_b64encode(f"~{t}~".encode()).decode().rstrip("="),
    "base64-mime": _mime,
    "url-in-base64": lambda t: base64.b64encode(urllib.parse.quote(t, safe="").encode()).decode(),
    **{
        f"U+{ord(mark):04X}": _invisible(mark)
        for mark in "\u200b\u2066\u2069\u034f\u061c\ufe0f\U000e0041\u180b\u17b4\u3164\u115f\u2800"
    },
}


def _leaking_script(turns: int, at: int, where: str, shown: str) -> ModelScript:
    """A scripted subject: `turns` turns, the leak in turn `at` (in its text, or in a tool call's
    arguments), every other turn clean, the last a clean answer."""
    body: list[dict[str, Any]] = []
    for turn in range(1, turns):
        text = f"Checking ({shown})." if turn == at and where == "text" else "Checking."
        query = shown if turn == at and where == "arguments" else "NW-51877"
        call = {"id": f"call_{turn}", "function": {"name": "lookup_order", "arguments": json.dumps({"q": query})}}
        body.append({"text": text, "tool_calls": [call]})
    body.append({"text": "Your refund is on its way; nothing else to share."})
    return ModelScript.model_validate({"turns": body})


def _rerun_scenario(home: Path, scenario: Scenario, model: str, gateway: ModelGateway) -> None:
    """Pay the rebuild's attempts of `scenario` again (a fresh generation) with subject `model`
    through the real engine and spend path, store them in place of the scenario's rows, judge the
    build again, and decide it again: what `run` does, for one scenario."""
    from eval_assets.capability.rows import scenario_run_rows
    from eval_assets.config import EngineSettings
    from eval_assets.engine import Engine
    from eval_assets.spend import SpendPath

    project = load_project(ROOT)
    track = Track(project, EvalHome(home))
    manifest = track.build(REBUILD)
    subject = manifest.subject.model_copy(update={"model": model, "params": {}})
    leaky = manifest.model_copy(update={"subject": subject})
    settings = EngineSettings(concurrency_per_model=4, timeout_s=5, max_tries=1)
    engine = Engine(SpendPath(track.journal, gateway, run_id="leak"), settings=settings)
    results = asyncio.run(engine.run_subjects(leaky, [scenario], generation=track.next_generation(REBUILD)))
    kept = track.warehouse.query(
        "SELECT * EXCLUDE (run_id, written_at) FROM scenario_runs WHERE build = ? AND scenario_id <> ?",
        [REBUILD, scenario.id],
    ).to_dict("records")
    rows = kept + scenario_run_rows(manifest, results)
    track.warehouse.write_partition("scenario_runs", {"build": REBUILD}, rows, "leak-runs")
    materialize_judge_verdicts(track, REBUILD, JUDGE, "leak-verdicts")
    decide(track, REBUILD, "leak-decision")


@st.composite
def policy_leaks(draw: st.DrawFn) -> tuple[str, Callable[[Path], None]]:
    """The forbidden string placed in any turn's text or tool call's arguments, in any form the
    policy's normalization promises to see through, every later turn clean."""
    turns = draw(st.integers(min_value=2, max_value=4))
    at = draw(st.integers(min_value=1, max_value=turns - 1))
    where = draw(st.sampled_from(["text", "arguments"]))
    form = draw(st.sampled_from(sorted(LEAK_FORMS)))
    script = _leaking_script(turns, at, where, LEAK_FORMS[form](LEAK))

    def apply(home: Path) -> None:
        project = load_project(ROOT)
        base = project.scenarios[LEAK_SCENARIO]
        assert LEAK in base.policy.forbidden_strings
        with_tools = Scenario.model_validate(
            {
                **base.model_dump(mode="json", exclude_none=True),
                "max_turns": turns,
                "tools": [
                    {
                        "type": "function",
                        "function": {
                            "name": "lookup_order",
                            "description": "Look up an order.",
                            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
                        },
                    }
                ],
            }
        )
        gateway = ModelGateway({"script/leak": (0.0, 0.0)}, scripts=lambda _name: script)
        _rerun_scenario(home, with_tools, "script/leak", gateway)

    return f"leak {form} in turn {at} of {turns} ({where})", apply


@st.composite
def policies_edited_after_the_run(draw: st.DrawFn) -> tuple[str, Callable[[Path], None]]:
    """After the rebuild's calls were paid and decided, a forbidden string that some stored output of
    a drawn scenario holds is added to that scenario's policy; `run` then reuses every settled call."""
    index = draw(st.integers(min_value=0, max_value=1 << 16))
    start = draw(st.integers(min_value=0, max_value=1 << 16))
    size = draw(st.integers(min_value=4, max_value=24))

    def apply(home: Path) -> Path:
        track = Track(load_project(ROOT), EvalHome(home))
        outputs = track.warehouse.query(
            "SELECT scenario_id, output FROM scenario_runs WHERE build = ? AND output IS NOT NULL "
            "AND trim(output) <> '' ORDER BY scenario_id, repeat",
            [REBUILD],
        )
        row = outputs.iloc[index % len(outputs)]
        text = str(row["output"])
        at = start % max(1, len(text) - size)
        forbidden = text[at : at + size].strip() or text.strip()
        copy = _project_copy(home.parent / "project")
        path = next(p for p in (copy / "scenarios").rglob("*.yaml") if yaml.safe_load(p.read_text())["id"] == row["scenario_id"])
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        policy = dict(data.get("policy") or {})
        policy["forbidden_strings"] = [*policy.get("forbidden_strings", []), forbidden]
        path.write_text(yaml.safe_dump({**data, "policy": policy}), encoding="utf-8")
        edited = Track(load_project(copy), EvalHome(home))
        materialize_scenario_runs(edited, REBUILD, "edited-runs")  # every settled call reused
        materialize_judge_verdicts(edited, REBUILD, JUDGE, "edited-verdicts")
        decide(edited, REBUILD, "edited-decision")
        return copy

    return f"policy edited after the run (output #{index}, at {start}, {size} chars)", apply


# --- family: a decision file copied from another build, with and without a re-trust -----------------


@st.composite
def copied_decisions(draw: st.DrawFn) -> tuple[str, Callable[[Path], None]]:
    """Another build's allow copied into the asked build's partitions: as bytes (its own name or a
    later one, the target's own decision kept or deleted) or through the writer (row and evidence
    rewritten to the target's build), then a re-trust (the manifest healthy, deleted or garbage) or none."""
    how = draw(st.sampled_from(["bytes", "bytes-later", "writer"]))
    drop_own = draw(st.booleans())
    manifest = draw(st.sampled_from([None, "healthy", "deleted", "garbage"]))

    def apply(home: Path) -> None:
        if how == "writer":  # the writer keys a row by its build: the copy's rows renamed to the target
            from eval_assets.warehouse import Warehouse

            warehouse = Warehouse(home / "warehouse")
            for table in ("release_decisions", "release_decision_reasons"):
                rows = warehouse.rows(
                    f"SELECT * EXCLUDE (run_id, written_at) FROM {table} WHERE build = ?", [REBUILD]
                )
                warehouse.write_partition(
                    table, {"build": BASE}, [{**r, "build": BASE} for r in rows], "copied"
                )
        else:
            later = time.time_ns() if how == "bytes-later" else None
            copy_decision(home, REBUILD, BASE, drop_own=drop_own, stamp=later)
        if manifest is not None:
            retrust(home, manifest)

    return f"copied {how} drop_own={drop_own} re-trust={manifest}", apply


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(perturbation=copied_decisions())
def test_release_status_never_exits_0_for_a_decision_copied_from_another_build(
    decided: Path, tmp_path_factory: pytest.TempPathFactory, perturbation: tuple[str, Callable[[Path], None]]
) -> None:
    what, apply = perturbation
    home = tmp_path_factory.mktemp("copied") / "copy"
    shutil.copytree(decided, home)
    apply(home)
    assert status(home, BASE) != 0, what


# --- a closed stdout is not an internal error ---------------------------------------------------------


@pytest.mark.parametrize(("build", "code"), [(REBUILD, 0), (BASE, 2)])
def test_a_closed_stdout_keeps_the_decisions_exit_code(
    copy_home: Callable[[str], Path], project: Project, build: str, code: int
) -> None:
    """`evaltrack release-status B | head -1` with the reader gone before anything is printed (the read
    end closed before the command starts: no race): before, exit 4 on the broken pipe, even for an allow."""
    import os
    import subprocess
    import sys

    home = copy_home("home")
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [
                str(Path(sys.executable).with_name("evaltrack")),
                "--project",
                str(project.root),
                "--home",
                str(home),
                "release-status",
                build,
            ],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        os.close(write)
    assert done.returncode == code, done.stderr
    assert (
        "internal error" not in done.stderr
        and "Traceback" not in done.stderr
        and "BrokenPipe" not in done.stderr
    )


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


def test_a_new_home_with_only_the_bucket_and_catalog_answers_release_status(
    object_decided: Any, tmp_path: Path
) -> None:
    """A run pod or CI job with no shared volume: a fresh EVAL_HOME (no manifests, no fence secret, no
    checked copies) reads the registered manifests from the bucket and proves the same allow."""
    object_decided.restore(tmp_path / "home")
    bare = tmp_path / "bare"
    assert object_decided.status(bare) == 0
    assert object_decided.status(bare, BASE) == 2
    assert sorted(p.name for p in (bare / "builds").iterdir()) == [f"{BASE}.yaml", f"{REBUILD}.yaml"]
    for name in (f"{BASE}.yaml", f"{REBUILD}.yaml"):
        assert (bare / "builds" / name).read_bytes() == (object_decided.home / "builds" / name).read_bytes()
    # nor is a missing home "nothing to verify": the damage is in the bucket
    perturb_object(_warehouse_of("object", bare, object_decided), "delete", "release_decisions", REBUILD, 0)
    other = str(tmp_path / "other")
    assert main(["--project", str(object_decided.project_dir), "--home", other, "warehouse", "verify"]) == 4


def test_the_object_store_holds_the_local_directorys_rows_and_decisions(
    decided: Path, object_decided: Any, tmp_path: Path
) -> None:
    """The same builds through the same steps on both implementations: the same current rows in every
    table (run ids, timestamps, timings and evidence's file names aside) and the same decisions."""
    from object_store import comparable_rows

    home = object_decided.restore(tmp_path / "home")
    local = comparable_rows(_warehouse_of("local", decided, None))
    on_bucket = comparable_rows(_warehouse_of("object", home, object_decided))
    assert {t: len(r) for t, r in on_bucket.items()} == {t: len(r) for t, r in local.items()}
    assert sum(len(r) for r in local.values()) > 0
    for table, rows in local.items():
        assert on_bucket[table] == rows, table
    decisions = "SELECT build, decision FROM release_decisions ORDER BY build"
    assert _warehouse_of("object", home, object_decided).rows(decisions) == [
        {"build": BASE, "decision": "none"},
        {"build": REBUILD, "decision": "allow"},
    ]
    assert _warehouse_of("local", decided, None).rows(decisions) == _warehouse_of(
        "object", home, object_decided
    ).rows(decisions)


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
