"""`evaltrack fixtures record`: one live run of a case written as a model script, redacted, never
overwriting without --force, paid through the spend journal; and it plays back as the same run."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

import pytest

from eval_assets.cli import main
from eval_assets.config import load_project, load_script
from eval_assets.gates import RECORD_BUILD, GateContext, execute_case, load_case
from eval_assets.home import PROJECT_ROOT
from eval_assets.spend import journal_url, open_journal

try:  # tests/ imported as a package or as a rootdir on sys.path
    from tests.openai_stub import Behaviour, OpenAIStub
except ImportError:
    from openai_stub import Behaviour, OpenAIStub  # type: ignore[no-redef]

COPIED = ("evaltrack.yaml", "gates", "scenarios", "rubrics", "judges", "examples")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    out = tmp_path / "proj"
    out.mkdir()
    for name in COPIED:
        src = PROJECT_ROOT / name
        if src.is_dir():
            shutil.copytree(src, out / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, out / name)
    # the engine's cases of this repository, as a project's case files
    shutil.copytree(PROJECT_ROOT / "tests" / "cases", out / "gates" / "cases", dirs_exist_ok=True)
    return out


def _record(root: Path, home: Path, *extra: str) -> int:
    return main(["--project", str(root), "--home", str(home), "fixtures", "record", *extra])


def _add_price(root: Path, model: str) -> None:
    settings = root / "evaltrack.yaml"
    settings.write_text(
        settings.read_text().replace("prices:\n", f"prices:\n  {model}: {{input_per_mtok: 1.0, output_per_mtok: 2.0}}\n", 1)
    )


def test_record_from_sim_plays_back_as_the_same_run(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    models = root / "gates/fixtures/models"
    before = sorted(p.name for p in models.iterdir())
    assert _record(root, home, "--case", "scripted-tool-loop", "--model", "sim/agent", "--name", "rec-loop") == 0
    assert "wrote gates/fixtures/models/rec-loop.yaml" in capsys.readouterr().out
    assert sorted(p.name for p in models.iterdir()) == sorted([*before, "rec-loop.yaml"])
    script, problems = load_script(root, "rec-loop")
    assert problems == [] and script is not None
    # the live call was paid through the spend journal, under its own build
    rows = open_journal(journal_url(home)).rows(build=RECORD_BUILD)
    assert rows and all(r.status == "settled" and r.cost_usd and r.cost_usd > 0 for r in rows)

    # played back through script/rec-loop, the case's subject gives the sim's run, call ids and all
    _add_price(root, "script/rec-loop")
    case_file = root / "gates/cases/scripted-tool-loop.yaml"
    ctx = GateContext(root=root, gate_id="x", kind="case", build="b", milestone=3, project_loader=lambda: load_project(root))
    recorded_case, _ = load_case(case_file)
    assert recorded_case is not None
    case_file.write_text(case_file.read_text().replace("script/tent-warranty-tool-loop", "script/rec-loop"))
    replayed_case, _ = load_case(case_file)
    assert replayed_case is not None
    played = execute_case(replayed_case, ctx)
    expected_ids = [c.id for t in script.turns for c in getattr(t, "tool_calls", [])]
    assert list(played.tool_call_ids) == expected_ids and expected_ids
    assert played.output == getattr(script.turns[-1], "text", None)
    assert played.output.startswith("Answer to converted.support-728838cd92b1")


def test_record_refuses_to_overwrite_without_force(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    target = root / "gates/fixtures/models/refund-retry-then-answer.yaml"
    original = target.read_bytes()
    args = ("--case", "canned-sim-verdict", "--model", "sim/agent", "--name", "refund-retry-then-answer")
    assert _record(root, home, *args) == 1
    assert "exists" in capsys.readouterr().err and target.read_bytes() == original
    assert _record(root, home, *args, "--force") == 0
    assert target.read_bytes() != original and load_script(root, "refund-retry-then-answer")[1] == []


def test_record_refuses_an_unpriced_model_and_a_failed_run(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    assert _record(root, home, "--case", "canned-sim-verdict", "--model", "sim/unpriced") == 1
    assert "no known price" in capsys.readouterr().err
    assert _record(root, home, "--case", "no-such-case", "--model", "sim/agent") == 1
    assert "no case 'no-such-case'" in capsys.readouterr().err
    assert not (root / "gates/fixtures/models/canned-sim-verdict.yaml").exists()


def test_record_against_an_http_endpoint_redacts_the_key(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    key = f"sk-canary-{secrets.token_hex(16)}"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    _add_price(root, "openai/local-test")
    with OpenAIStub() as stub:
        stub.script(Behaviour.ok("Refunds within 30 days.", echo_key=True), Behaviour.server_error())
        args = ("--case", "canned-sim-verdict", "--model", "openai/local-test", "--api-base", stub.base_url)
        assert _record(root, tmp_path / "home", *args, "--name", "http-rec") == 0
        text = (root / "gates/fixtures/models/http-rec.yaml").read_text()
        assert "Refunds within 30 days." in text and key not in text and "[redacted]" in text
        assert len(stub.requests) == 1  # one run, one try
        # a failed live run writes nothing
        assert _record(root, tmp_path / "home", *args, "--name", "http-fail") == 1
        assert "failed" in capsys.readouterr().err
        assert not (root / "gates/fixtures/models/http-fail.yaml").exists()


def test_a_recorded_fixture_masks_personal_data(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", f"plain{secrets.token_hex(12)}")
    _add_price(root, "openai/local-test")
    reply = "Mail jane.doe@example.com, card 4111 1111 1111 1111, phone +44 20 7946 0958."
    with OpenAIStub() as stub:
        stub.script(Behaviour.ok(reply))
        args = ("--case", "canned-sim-verdict", "--model", "openai/local-test", "--api-base", stub.base_url)
        assert _record(root, tmp_path / "home", *args, "--name", "pii-rec") == 0
    text = (root / "gates/fixtures/models/pii-rec.yaml").read_text()
    assert "jane.doe" not in text and "4111 1111" not in text and "7946" not in text
    assert "[email]" in text and "[card number]" in text and "[phone number]" in text


def test_a_script_name_shaped_like_a_key_is_refused_and_nothing_written(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "gh" + "o_" + "A1b2C3d4E5" * 4
    assert _record(root, tmp_path / "home", "--case", "canned-sim-verdict", "--model", "sim/agent", "--name", name) == 1
    err = capsys.readouterr().err
    assert "looks like a credential" in err and name not in err
    assert not list((root / "gates/fixtures/models").glob("gh*"))
