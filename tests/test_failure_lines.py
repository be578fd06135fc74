"""Every failure of a run is one line on the terminal naming its cause, with the build, scenario and
attempt (issue 47): `evaltrack run` on an `evaltrack init` project whose agent fails each way."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._serdes import serialize_value

from eval_assets.cli import main
from eval_assets.home import EvalHome

BUILD = "fail-1"
ATTEMPT = f"{BUILD}/starter.order-status/1"
AGENTS = """
async def raises(task):
    raise RuntimeError("the tool registry is empty")


async def wrong_shape(task):
    return {"answer": "the field is called output"}
"""


def _dead_url() -> str:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/attempt"


def _project(tmp_path: Path, agent: dict[str, object], params: dict[str, object], ceiling: float) -> Path:
    project = tmp_path / "proj"
    assert main(["init", str(project)]) == 0
    (project / "fail_agents.py").write_text(AGENTS)
    settings = yaml.safe_load((project / "evaltrack.yaml").read_text())
    settings["spend"]["scenario_ceiling_usd"] = ceiling
    (project / "evaltrack.yaml").write_text(yaml.safe_dump(settings))
    manifest = yaml.safe_load((project / "examples/builds/my-agent.yaml").read_text())
    manifest["id"] = BUILD
    manifest["baseline"] = "my-agent-1"
    manifest["subject"]["agent"] = agent
    manifest["subject"]["params"].update(params)
    (project / "fail.yaml").write_text(yaml.safe_dump(manifest))
    return project


def _run(capsys: pytest.CaptureFixture[str], project: Path, home: Path, *extra: str) -> tuple[int, str, str]:
    for manifest in ("examples/builds/my-agent.yaml", "fail.yaml"):  # the baseline (never run), the build
        assert (
            main(["--project", str(project), "--home", str(home), "build", "add", str(project / manifest)])
            == 0
        )
    capsys.readouterr()
    code = main(["--project", str(project), "--home", str(home), *extra, "run", "--build", BUILD])
    out, err = capsys.readouterr()
    return code, out, err


CASES = {
    "agent unreachable": (
        lambda: {"http": _dead_url(), "timeout_s": 10},
        {},
        0.25,
        f"scenario_runs FAILED · build {BUILD}: AgentUnreachable: attempt {ATTEMPT}: agent at "
        "http://127.0.0.1:{port}/attempt refused the connection: ConnectError",
    ),
    "agent raised": (
        lambda: {"entrypoint": "fail_agents:raises"},
        {},
        0.25,
        f"{ATTEMPT} (and 2 more attempts): agent_raised: RuntimeError: the tool registry is empty",
    ),
    "shape error": (
        lambda: {"entrypoint": "fail_agents:wrong_shape"},
        {},
        0.25,
        f"{ATTEMPT} (and 2 more attempts): agent_shape: result.answer: unknown field (allowed: output, notes)",
    ),
    "ceiling": (
        lambda: {"entrypoint": "agent:run"},
        {},
        0.0,
        f"{ATTEMPT} (and 2 more attempts): excluded: scenario ceiling $0 reached",
    ),
    "provider error": (
        lambda: {"entrypoint": "agent:run"},
        {"error_rate": 1.0},
        0.25,
        f"{ATTEMPT} (and 2 more attempts): InternalServerError: litellm.InternalServerError: sim: injected "
        "provider error (503 upstream overloaded) (then the agent raised",
    ),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_kind_of_failure_is_one_line_naming_its_cause_build_scenario_and_attempt(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent, params, ceiling, expected = CASES[kind]
    manifest_agent = agent()
    project = _project(tmp_path, manifest_agent, params, ceiling)
    if "http" in manifest_agent:
        expected = expected.replace("{port}", str(manifest_agent["http"]).rsplit(":", 1)[1].split("/")[0])

    code, out, err = _run(capsys, project, tmp_path / "home")

    lines = [line.strip() for line in out.splitlines()]
    assert code == 1 or kind != "agent unreachable"
    assert any(line.startswith(expected) for line in lines), out + err
    # one line per distinct failure: the provider's failure is named, not as the agent's own
    assert sum(line.startswith(ATTEMPT) or "FAILED" in line for line in lines) == 1
    assert "Traceback" not in out + err and 'File "' not in out + err
    assert f"{BUILD}: " in out and "(baseline my-agent-1)" in out  # the manifest's baseline, not "none"


def test_debug_writes_a_failed_steps_redacted_detail_to_the_home_and_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path, {"http": _dead_url(), "timeout_s": 10}, {}, 0.25)
    home = tmp_path / "home"

    code, out, _err = _run(capsys, project, home, "--debug")

    log = home / "logs" / "debug.log"
    assert code == 1 and f"(detail in {log})" in out
    detail = log.read_text(encoding="utf-8")
    assert "AgentUnreachable: attempt " in detail and "error ID " in detail
    assert not FRAME.search(detail) and not FRAME.search(out)


# a Python stack frame or traceback header, as text or inside serialized JSON
FRAME = re.compile(r'File \\?"[^"\n]*\\?", line \d+|Traceback \(most recent call last\)')


def _stored_step_failures(home: Path) -> tuple[str, list[dg.DagsterEvent]]:
    """Every event of every run in the home's Dagster instance, serialized as Dagster stores it, and
    the step failures among them."""
    instance = dg.DagsterInstance.from_config(str(home / "dagster"))
    try:
        entries = [e for r in instance.get_run_records() for e in instance.all_logs(r.dagster_run.run_id)]
    finally:
        instance.dispose()
    failures = [e.dagster_event for e in entries if e.dagster_event and e.dagster_event.is_step_failure]
    return "\n".join(serialize_value(e) for e in entries), failures


@pytest.mark.parametrize("kind", ["agent unreachable", "agent raised"])
def test_a_failed_step_stores_one_line_naming_its_root_cause_and_no_stack_anywhere(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the agent down fails scenario_runs (an exception deep in the engine); the agent that raises
    # fails the suite's blocking gates and the approval (Dagster's own check error and a dg.Failure)
    manifest_agent = CASES[kind][0]()
    project = _project(tmp_path, manifest_agent, {}, 0.25)
    home = tmp_path / "home"

    code, out, err = _run(capsys, project, home)

    events, failures = _stored_step_failures(home)
    assert code == 1 and failures and events
    assert not FRAME.search(events), FRAME.search(events)
    steps = {e.step_key: e.step_failure_data for e in failures}
    for step, data in steps.items():
        assert data.error is not None and data.error.stack == [], step
        assert data.error.cause is None and data.error.context is None, step
        assert data.user_failure_data is not None and data.user_failure_data.description, step
    if kind == "agent unreachable":
        line = steps["scenario_runs"].user_failure_data.description
        assert line.startswith("AgentUnreachable: attempt fail-1/starter.order-status/1: agent at")
        assert f"scenario_runs FAILED · build {BUILD}: {line}" in out  # the line the command printed
        assert "\n" not in line and line in steps["scenario_runs"].error.message
    else:
        line = steps["deterministic_suite"].user_failure_data.description
        assert line.startswith(f"{BUILD}: failing or erroring gates: ")
        assert line in steps["deterministic_suite"].error.message and "\n" not in line
        assert "release_approval" in steps  # refused: the build may not ship
    assert not FRAME.search(out + err)
    for path in home.rglob("*"):  # the event log's database, compute logs, journal, warehouse, logs
        if path.is_file():
            assert not FRAME.search(path.read_bytes().decode("utf-8", "replace")), path


def test_every_asset_of_the_location_fails_as_one_line() -> None:
    """An asset body without `one_line_failure` would fail with Dagster's masked message, its root
    cause lost: every computed asset of the code location carries it."""
    from eval_assets.definitions import defs

    loaded = defs() if callable(defs) else defs
    bodies = {
        key.to_user_string(): asset.op.compute_fn.decorated_fn
        for asset in loaded.assets or []
        if isinstance(asset, dg.AssetsDefinition) and asset.is_executable
        for key in asset.keys
    }
    assert len(bodies) >= 11
    assert [name for name, fn in sorted(bodies.items()) if not getattr(fn, "one_line_failure", False)] == []


def test_an_error_dagster_masks_is_kept_by_its_id_redacted_and_frameless_in_the_homes_debug_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the switch Dagster stores a masked note with an error ID (a sensor tick's error, a step
    that raised outside `one_line_failure`); the error itself goes to `dagster.redacted_errors`, whose
    one handler appends the ID and the redacted cause chain to the home's debug log, so the ID leads
    somewhere."""
    from eval_assets.defs.failures import REDACT_SWITCH, mask_user_code_errors

    monkeypatch.setenv(REDACT_SWITCH, "1")  # set back as it was after the test
    mask_user_code_errors(EvalHome(tmp_path / "home"))  # what loading the location does
    key = "sk-" + "A1b2C3d4" * 5

    @dg.op
    def raises_outside_the_wrapper() -> None:
        try:
            raise KeyError(f"api_key={key}")
        except KeyError as exc:
            raise RuntimeError("the registry read failed") from exc

    @dg.job
    def masked() -> None:
        raises_outside_the_wrapper()

    with dg.DagsterInstance.ephemeral() as instance:
        result = masked.execute_in_process(instance=instance, raise_on_error=False)
    [failure] = [e for e in result.all_events if e.is_step_failure]
    stored = failure.step_failure_data.error.message
    error_id = re.search(r"error ID ([0-9a-f-]{36})", stored)
    assert error_id and "the registry read failed" not in stored  # Dagster masked the message

    log = (tmp_path / "home" / "logs" / "debug.log").read_text(encoding="utf-8")
    entry = log[log.index(error_id.group(1)) :]
    assert "RuntimeError: the registry read failed" in entry and "KeyError: " in entry
    assert key not in log and not FRAME.search(log)
