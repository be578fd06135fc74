"""The suite needs no network: the record's gate, the namespace facts, the Dagster event-log dump.

The gate reads a record of the no-network run (eval_assets/gates/project_checks/network.py); here records
are written by the test (one that is a proof for this tree, then each way it can fail to be one).
The network facts are taken in a real network namespace (`unshare --net`). The Dagster dump runs a
real job on a real instance with a planted key in a tag, a log line and materialization metadata
(the Dagster canary's scan, a test of this repository: tests/invariants/dagster_canary.py).
The whole recorded run is `scripts/suite_no_network` (part of `.ci/run`).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from gates_fixtures.build import REPO
from invariants.dagster_canary import dump_event_log, small_project
from invariants.security import scan_for_secret

from eval_assets.gates import GateResult, read_registry, run_suite
from eval_assets.gates.project_checks import network
from eval_assets.home import EvalHome

GATES = {network.SUITE_GATE}


def proof() -> dict[str, Any]:
    """A record that is a proof for this tree: every example build green, only `lo`, no key."""
    tree, files = network.tree_fingerprint(REPO)
    manifests = [m.relative_to(REPO).as_posix() for m in network.example_manifests(REPO)]
    return {
        "format": network.FORMAT,
        "recorded_at": "2026-12-02T12:00:00+00:00",
        "head": "0" * 40,
        "tree": tree,
        "tree_files": files,
        "seconds": 1.0,
        "network": {
            "interfaces": ["lo"],
            "non_loopback_interfaces": [],
            "loopback_connects": True,
            "outside_routes": {"1.1.1.1:53": "no route (ENETUNREACH)"},
            "route_out": False,
        },
        "environment": {
            "names": ["EVAL_HOME", "HOME", "LITELLM_OFFLINE_MODE", "PATH"],
            "credential_names": [],
        },
        "builds": [
            {
                "manifest": m,
                "build": Path(m).stem,
                "exit_code": 0,
                "blocking": [],
                "gates": [{"gate_id": "g", "status": "pass"}],
                "seconds": 1.0,
            }
            for m in manifests
        ],
    }


def gates_on(record: dict[str, Any] | None, tmp_path: Path) -> dict[str, GateResult]:
    path = tmp_path / "ci" / "suite-no-network.json"
    if record is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record), encoding="utf-8")
    result = run_suite(
        read_registry(REPO),
        milestone=5,  # the gate's milestone: past every shipped example build
        build="b",
        only=GATES,
        converted_glob=None,
        hooks={"no_network.record": lambda: path},
    )
    return {r.gate_id: r for r in result.results}


def test_a_proof_of_this_tree_passes_the_gate(tmp_path: Path) -> None:
    rows = gates_on(proof(), tmp_path)

    assert {g: r.status for g, r in rows.items()} == {g: "pass" for g in GATES}, [
        r.full_message() for r in rows.values()
    ]
    assert "3 example builds' suites" in rows[network.SUITE_GATE].message


def test_without_a_record_the_gate_fails_and_says_so(tmp_path: Path) -> None:
    rows = gates_on(None, tmp_path)

    assert {r.status for r in rows.values()} == {"fail"}
    assert all(r.message.startswith("no record at ") for r in rows.values())


def _with(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    record = copy.deepcopy(proof())
    change(record)
    return record


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(record: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = record
        for p in parents:
            target = target[int(p)] if p.isdigit() else target[p]
        target[last] = value

    return change


@pytest.mark.parametrize(
    ("change", "finding"),
    [
        (_set("tree", "f" * 64), "stale: recorded for tree ffffffffffff"),
        (_set("network.interfaces", ["eth0", "lo"]), "network interfaces ['eth0', 'lo']"),
        (_set("network.non_loopback_interfaces", ["eth0"]), "network interfaces"),
        (_set("network.route_out", True), "had a route out"),
        (_set("network.route_out", None), "had a route out"),
        (
            _set("environment.credential_names", ["OPENAI_API_KEY"]),
            "credential variables: ['OPENAI_API_KEY']",
        ),
        (_set("format", 0), f"is not format {network.FORMAT}"),
    ],
)
def test_a_record_of_another_tree_or_with_a_network_or_a_key_fails_the_gate(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], finding: str
) -> None:
    rows = gates_on(_with(change), tmp_path)

    for row in rows.values():
        assert row.status == "fail", row.full_message()
        assert finding in row.full_message(), row.full_message()


@pytest.mark.parametrize(
    ("change", "finding"),
    [
        (_set("builds.1.exit_code", 1), "exited 1"),
        (_set("builds.0.blocking", ["arch.import-graph"]), "arch.import-graph"),
        (_set("builds.2.error", "Traceback"), "Traceback"),
        (_set("builds.0.gates", [{"gate_id": "g", "status": "pending"}]), "no gate passed"),
        (lambda r: r["builds"].pop(), "the record ran builds"),
        (_set("builds", []), "the record ran builds []"),
    ],
)
def test_a_failing_or_missing_build_fails_the_gate(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], finding: str
) -> None:
    rows = gates_on(_with(change), tmp_path)

    suite = rows[network.SUITE_GATE]
    assert suite.status == "fail" and finding in suite.full_message(), suite.full_message()


def test_editing_a_tracked_file_changes_the_fingerprint(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    (root / "gates").mkdir(parents=True)
    shutil.copyfile(REPO / "gates" / "security.yaml", root / "gates" / "security.yaml")
    before = network.tree_fingerprint(root)  # not a git work tree: every file under the root

    (root / "gates" / "security.yaml").write_text("gates: []\n", encoding="utf-8")

    assert network.tree_fingerprint(root)[0] != before[0] and before[1] == 1


def _in_namespace(script: str) -> dict[str, Any]:
    if shutil.which("unshare") is None:
        pytest.fail("unshare is missing (util-linux): the no-network proof needs it")
    prefix = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--net", "--map-root-user"]
    code = "import json; from eval_assets.gates.project_checks.network import network_facts; print(json.dumps(network_facts()))"
    done = subprocess.run(
        [*prefix, "--", "sh", "-c", f"{script} exec {sys.executable} -c '{code}'"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_a_network_namespace_shows_only_loopback_and_no_route_out() -> None:
    facts = _in_namespace("ip link set lo up &&")

    assert facts["interfaces"] == ["lo"] and facts["non_loopback_interfaces"] == []
    assert facts["loopback_connects"] is True
    assert facts["route_out"] is False and all(
        v.startswith("no route") for v in facts["outside_routes"].values()
    )


def test_loopback_down_is_seen_as_down() -> None:
    assert _in_namespace("")["loopback_connects"] is False


def test_the_event_log_dump_holds_every_channel_a_key_could_reach(tmp_path: Path) -> None:
    key = "PLAINCANARYDUMP" + os.urandom(8).hex()
    home = EvalHome(tmp_path / "home").ensure()

    @dg.op
    def leaky(context):  # type: ignore[no-untyped-def]  # Dagster reads the annotation: none or a class
        context.log.info(f"log line {key}")
        context.log_event(dg.AssetMaterialization("leak", metadata={"where": key}))

    @dg.job
    def leaky_job() -> None:
        leaky()

    saved = os.environ.get("DAGSTER_HOME")
    try:
        from eval_assets.cli.orchestrate import instance_for

        instance = instance_for(home)
        result = leaky_job.execute_in_process(instance=instance, tags={"planted": key})
        assert result.success
        dump = tmp_path / "events.jsonl"
        runs, events = dump_event_log(home, dump)
    finally:
        if saved is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = saved

    lines = dump.read_text(encoding="utf-8").splitlines()
    holding = [line for line in lines if key in line]
    assert runs == 1 and events == len(lines) - 1 and events > 5
    assert holding[0].startswith('{"__class__": "PipelineRun"')  # the run record (its tags)
    assert any("log line" in line for line in holding)  # a log message
    assert any("AssetMaterialization" in line for line in holding)  # materialization metadata
    findings, _ = scan_for_secret([dump], [key])
    assert findings == [f"{dump}: the key is in the file's bytes"]


def test_the_runner_selects_by_kind_and_leaves_out_excluded_ids() -> None:
    registry = read_registry(REPO)
    corpora = {g.id for g in registry.gates if g.kind == "corpus"}
    left_out = "config.every-scenario-validates"

    by_kind = run_suite(registry, milestone=0, kinds={"corpus"}, exclude={left_out}, converted_glob=None)

    listed = {r.gate_id for r in by_kind.results}
    assert {r.kind for r in by_kind.results} == {"corpus"}
    assert listed == corpora - {left_out} and left_out in corpora and len(corpora) >= 2


def _evaltrack(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eval_assets.cli", "--project", str(REPO), "gates", "run", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_gates_run_prints_the_rows_and_exits_by_what_blocks() -> None:
    ran = _evaltrack("--milestone", "0", "--only", "config.example-builds-validate", "--format", "json")
    nothing = _evaltrack("--milestone", "0", "--only", "no.such.gate")
    both = _evaltrack("--milestone", "0", "--manifest", str(REPO / "examples" / "builds" / "baseline.yaml"))

    report = json.loads(ran.stdout)
    assert ran.returncode == 0 and report["exit_code"] == 0, ran.stderr
    assert [(r["gate_id"], r["status"]) for r in report["results"]] == [
        ("config.example-builds-validate", "pass")
    ]
    assert nothing.returncode == 1 and "no gate matched" in nothing.stderr
    assert both.returncode == 1 and "exactly one of --manifest FILE and --milestone N" in both.stderr


def test_the_dagster_canary_project_has_one_two_repeat_scenario_per_judge_and_no_gates(tmp_path: Path) -> None:
    from eval_assets.config import load_project

    root = small_project(REPO, tmp_path / "p")

    project = load_project(root)
    shipped = load_project(REPO)
    assert [j.version_id for j in project.active_judges] == [j.version_id for j in shipped.active_judges]
    assert sorted(s.id for s in project.scenarios.values()) == sorted(
        shipped.scenarios_judged_by(j)[0].id for j in shipped.active_judges
    )
    assert {s.repeats for s in project.scenarios.values()} == {2}
    registry = read_registry(root)
    assert (registry.gates, registry.tests, registry.invalid) == ((), (), ())  # the canary never runs itself
