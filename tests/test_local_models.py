"""Local models without the server: declarations, the judge's pin and identity, the schema-constrained
verdict parser, the weights' check, the refusal before a run, and the watchdog and orphan reaping on
real processes. The real model runs in the e2e lane (tests/test_e2e_local_model.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared import ledger

from eval_assets.config import ConfigError, content_hash, load_project
from eval_assets.home import EvalHome
from eval_assets.judging import parse_verdict, verdict_schema
from eval_assets.localmodel import SUPERVISOR, LocalModelError, LocalServers, proc_identity, verified

ROOT = Path(__file__).resolve().parents[1]
LOCAL = ROOT / "examples" / "local"
SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def _copy(dest: Path) -> Path:
    import shutil

    shutil.copytree(LOCAL, dest)
    return dest


def _edit_yaml(path: Path, **changes: Any) -> None:
    data = yaml.safe_load(path.read_text())
    data.update(changes)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _problems(project: Path) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load_project(project)
    return [f"{p.field}: {p.message}" for p in err.value.problems]


def test_a_local_model_is_priced_zero_by_its_declaration_and_nothing_else_is() -> None:
    project = load_project(LOCAL)
    table = project.settings.price_table()
    assert table["local/smollm2"] == (0.0, 0.0)
    assert [m for m in table if m.startswith("local/")] == ["local/smollm2"]


def test_a_judge_on_an_undeclared_local_model_is_refused(tmp_path: Path) -> None:
    project = _copy(tmp_path / "p")
    _edit_yaml(project / "judges" / "answer-v1.yaml", model="local/nosuch")
    assert any("'nosuch' is not declared under `local_models:`" in p for p in _problems(project))


@pytest.mark.parametrize(
    ("pin", "expected"),
    [
        (None, "local_model: a judge on 'local/smollm2' must pin its weights and runtime"),
        ({"sha256": "0" * 64, "runtime": "llama-cpp-python==0.3.36"}, "local_model.sha256: differs"),
        ({"sha256": SHA, "runtime": "llama-cpp-python==0.3.35"}, "local_model.runtime: differs"),
    ],
)
def test_a_local_judge_must_pin_the_declared_weights_and_runtime(
    tmp_path: Path, pin: dict[str, str] | None, expected: str
) -> None:
    project = _copy(tmp_path / "p")
    path = project / "judges" / "answer-v1.yaml"
    data = yaml.safe_load(path.read_text())
    data.pop("local_model")
    if pin is not None:
        data["local_model"] = pin
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert any(p.startswith(expected) for p in _problems(project)), _problems(project)


def test_the_weights_pin_is_part_of_the_judge_identity_and_absent_for_other_judges() -> None:
    project = load_project(LOCAL)
    local = project.judges["answer-v1"]
    rubric = project.rubric_for(local)
    assert local.local_model is not None
    other = local.model_copy(
        update={"local_model": local.local_model.model_copy(update={"sha256": "1" * 64})}
    )
    assert content_hash(other, rubric) != content_hash(local, rubric)
    runtime = local.model_copy(update={"local_model": local.local_model.model_copy(update={"runtime": "x"})})
    assert content_hash(runtime, rubric) != content_hash(local, rubric)
    # a judge without a pin hashes as before the field existed: the shipped registry still validates
    load_project(ROOT)


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-10, 10)
    | st.floats(-10, 10, allow_nan=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.dictionaries(
        st.sampled_from(["correct", "clear", "extra"]) | st.text(max_size=6), _JSON, max_size=4
    ),
    pad=st.sampled_from(["", " ", "\n", "x", "</verdict>"]),
)
def test_parser_2_scores_exactly_the_replies_the_schema_it_sends_admits(
    data: dict[str, Any], pad: str
) -> None:
    """The class of defects: a verdict the schema admits but the parser refuses (a lost score), or one
    the parser scores that the schema (so the rubric) does not admit. Replies with anything around the
    object fail closed, never score."""
    rubric = load_project(LOCAL).rubrics["answer-v1"]
    schema = verdict_schema(rubric)
    reply = json.dumps(data) + pad
    verdict = parse_verdict(reply, rubric, parser_version=2)
    admitted = pad.strip() == "" and jsonschema.Draft202012Validator(schema).is_valid(data)
    # JSON's 3.0 is an integer to the schema but not to the rubric's int scale: the parser is stricter
    floats_as_ints = any(isinstance(v, float) for v in data.values())
    assert (verdict.status == "scored") == (admitted and not floats_as_ints), (reply, verdict)
    if verdict.status == "scored":
        assert verdict.criteria == data
    else:
        assert verdict.failure_reason and verdict.score is None


def test_the_weights_are_refused_when_missing_or_different(tmp_path: Path) -> None:
    model = load_project(LOCAL).settings.local_models["smollm2"]
    with pytest.raises(LocalModelError, match="run `bash scripts/setup local-model`"):
        verified("smollm2", model, tmp_path)
    (tmp_path / f"{SHA}.gguf").write_bytes(b"not the weights")
    with pytest.raises(LocalModelError, match="not the declared"):
        verified("smollm2", model, tmp_path)


def test_a_run_of_a_local_model_that_cannot_be_served_is_refused_before_anything_is_paid(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    exe = Path(sys.executable).with_name("evaltrack")
    common = [str(exe), "--project", str(LOCAL), "--home", str(home)]
    subprocess.run([*common, "build", "add", str(LOCAL / "examples/builds/baseline.yaml")], check=True)
    done = subprocess.run([*common, "run", "--build", "smollm2-baseline"], capture_output=True, text=True)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "run `bash scripts/setup local-model`" in lines[0], done.stderr
    assert not (home / "journal.sqlite").exists() or ledger(home) == []


_OWNER = """
import subprocess, sys
watchdog = subprocess.Popen(
    [sys.executable, "-I", sys.argv[1], str(__import__("os").getpid()), "--",
     sys.executable, "-c", "import time; time.sleep(300)"],
    start_new_session=True,
)
print(watchdog.pid, flush=True)
watchdog.wait()
"""


def _gone(pid: int, within_s: float) -> bool:
    """Whether process `pid` has exited (or is a zombie) within `within_s`, polled."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if proc_identity(pid)["start"] == -1:
            return True
        time.sleep(0.05)
    return False


def test_the_watchdog_stops_the_server_when_its_owner_is_killed_with_kill_9() -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(SUPERVISOR)], stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    watchdog = int(owner.stdout.readline())
    deadline = time.monotonic() + 30
    children: list[str] = []
    while not children and time.monotonic() < deadline:
        children = Path(f"/proc/{watchdog}/task/{watchdog}/children").read_text().split()
        time.sleep(0.05)
    server = int(children[0])
    assert proc_identity(server)["start"] != -1
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    assert _gone(server, 15), "the server outlived its owner"
    assert _gone(watchdog, 15), "the watchdog outlived its owner"


def test_an_orphans_state_is_reaped_before_a_new_start(tmp_path: Path) -> None:
    """A state file whose owner is dead: what still runs of it is killed and the file removed, even
    when the new start then fails (here: no weights)."""
    project = load_project(LOCAL)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        servers = LocalServers(EvalHome(tmp_path), project.settings, project.root)
        servers.state_dir.mkdir(parents=True)
        state = {
            "name": "smollm2",
            "port": 1,
            "key": "k",
            "owner": {"pid": dead.pid, "start": 1},
            "supervisor": proc_identity(stray.pid),
            "server": None,
        }
        (servers.state_dir / "smollm2.json").write_text(json.dumps(state))
        with pytest.raises(LocalModelError):
            servers.route("smollm2")
        assert stray.wait(timeout=15) == -signal.SIGKILL
        assert not (servers.state_dir / "smollm2.json").exists()
    finally:
        if stray.poll() is None:
            stray.kill()
            stray.wait()
