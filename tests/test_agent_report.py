"""The HTML report shows the whole agent attempt (issue 47): per call what the agent sent (its own
system prompt, the tool results it sent back), the model's reply, latency, tokens and cost, and the
agent's notes; for a 20-call attempt, every call."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
import yaml

from eval_assets.cli import main

BUILD = "calc-1"
CALLS = 20  # a scenario's max_turns at its most
REPEATS = 2  # the fewest a scenario has
AGENT = f"""
import httpx
from openai import AsyncOpenAI

SYSTEM = "You are Calc, an agent of our own: use the calculator; never guess."


async def run(task):
    key = task.api_key
    client = AsyncOpenAI(base_url=task.base_url, api_key=key, max_retries=0,
                         timeout=httpx.Timeout(600.0, connect=60.0),
                         http_client=httpx.AsyncClient(trust_env=False))
    messages = [{{"role": "system", "content": SYSTEM}}, *task.messages]
    async with client:
        for i in range(1, {CALLS} + 1):
            reply = await client.chat.completions.create(model=task.model, messages=messages)
            if i == {CALLS}:
                return {{"output": reply.choices[0].message.content or "", "notes": "calculator failed {CALLS - 1} times"}}
            call = {{"id": f"calc_{{i}}", "type": "function",
                     "function": {{"name": "calc", "arguments": '{{"expr": "0{{i}}.5.1"}}'}}}}
            messages.append({{"role": "assistant", "content": reply.choices[0].message.content, "tool_calls": [call]}})
            messages.append({{"role": "tool", "tool_call_id": f"calc_{{i}}",
                              "content": f"calc result {{i}}: error: invalid decimal literal"}})
"""


@pytest.fixture
def reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, Path]:
    project = tmp_path / "proj"
    assert main(["init", str(project)]) == 0
    (project / "calc_agent.py").write_text(AGENT)
    path = project / "scenarios/starter/starter.order-status.yaml"
    scenario = yaml.safe_load(path.read_text())
    scenario.update(max_turns=CALLS, repeats=REPEATS)
    path.write_text(yaml.safe_dump(scenario))
    manifest = yaml.safe_load((project / "examples/builds/my-agent.yaml").read_text())
    manifest["id"] = BUILD
    manifest["subject"]["agent"] = {"entrypoint": "calc_agent:run", "timeout_s": 120}
    (project / "calc.yaml").write_text(yaml.safe_dump(manifest))
    home = tmp_path / "home"
    cli = ["--project", str(project), "--home", str(home)]
    assert main([*cli, "build", "add", str(project / "calc.yaml")]) == 0
    main([*cli, "run", "--build", BUILD])  # its decision may block: the attempt is what is looked at
    page = tmp_path / "report.html"
    assert main([*cli, "report", BUILD, "--html", str(page)]) == 0
    capsys.readouterr()
    return page.read_text(encoding="utf-8"), home


def test_a_20_call_agent_attempt_s_report_shows_every_call_tool_result_system_prompt_notes_and_latency(
    reported: tuple[str, Path],
) -> None:
    page, _home = reported
    text = html.unescape(page)

    assert text.count(f"Agent calls ({CALLS})") == REPEATS
    heads = re.findall(
        r"call (\d+) · ok · latency [\d.]+ s · tokens (\d+) in / (\d+) out · cost \$([\d.]+)", text
    )
    assert [int(h[0]) for h in heads] == list(range(1, CALLS + 1)) * REPEATS
    assert all(int(h[1]) > 0 and int(h[2]) > 0 and float(h[3]) > 0 for h in heads)
    for i in range(1, CALLS):  # every tool result the agent sent back, once, under the call after it
        assert text.count(f"calc result {i}: error: invalid decimal literal") == REPEATS
        assert f"tool (result of calc_{i})" in text
    assert text.count("You are Calc, an agent of our own") == REPEATS  # its own system prompt, as it sent it
    assert f"calculator failed {CALLS - 1} times" in text  # its notes
    # the attempt's latency_s: its wall-clock time (it was 0.0 for every agent attempt)
    latencies = re.findall(r"turns \d+ · replay misses \d+ · latency ([\d.]+) s", text)
    assert len(latencies) == REPEATS and all(float(x) > 0 for x in latencies)
