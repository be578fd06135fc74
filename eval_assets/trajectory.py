"""Trajectories into cases: convert a redacted trajectory export into scenario files.

design rule: conversion consumes the already-redacted export (never the raw event log), replays recorded
tool results rather than re-executing tools, and discards timestamps, identifiers, usage and cost. A
converted case is `source: trajectory` and never blocks a release until a person writes its
assertions; this module never writes one. The export format: docs/trajectory-export.md.

- `read_export` parses and checks an export: the redaction header, anything credential-shaped, the
  shape of every trajectory. Every problem names its line; nothing is returned unless all lines pass.
- `convert_export` turns each trajectory into one scenario file under an output directory. The
  scenario id is a hash of the replayable content, so converting twice writes the same bytes and two
  identical trajectories make one case. It validates everything before writing anything, and never
  overwrites a file a person has added assertions to.

The recorded tool results are replayed at run time by the engine (`eval_assets.engine.Replay`).

Plain typed Python: no Dagster, no model calls.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from eval_assets import redact
from eval_assets.canonical import canonical_arguments, canonical_json
from eval_assets.config import (
    MAX_YAML_BYTES,
    Problem,
    ProblemsFound,
    Scenario,
    YamlRefused,
    parse_yaml,
    read_capped,
    read_yaml_file,
    validate_model,
)
from eval_assets.safe_write import check_target, write_files

# Fields a raw event log carries and a converted case must not (design rule: timestamps, identifiers,
# usage and cost are discarded); the trajectory gate fails a case holding one, and the converter
# refuses an export that would carry one into a case. The scenario's own top-level `id` is derived
# from content: allowed.
RAW_LOG_FIELDS = frozenset(
    {
        "timestamp",
        "timestamps",
        "created",
        "created_at",
        "updated_at",
        "started_at",
        "ended_at",
        "time",
        "request_id",
        "response_id",
        "message_id",
        "trace_id",
        "span_id",
        "run_id",
        "session_id",
        "call_id",
        "tool_call_id",
        "usage",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "cost",
        "cost_usd",
        "price",
    }
)


EXPORT_FORMAT = "agent-trajectory-export"
EXPORT_VERSION = 1
DEFAULT_JUDGE = "helpfulness"
DEFAULT_SUITE = "converted"
DEFAULT_MAX_TURNS = 6
MAX_TURNS_LIMIT = 20  # Scenario.max_turns' bound
ID_PREFIX = "converted."
BASELINE_FORBIDDEN = ("-----BEGIN PRIVATE KEY-----",)
"""The project's baseline policy, the same on every shipped scenario (a leaked key is a policy failure).
Never derived from the recording: conversion generates no check of what the agent did."""
HASH_CHARS = 12
MAX_JSON_DEPTH = 48
"""Deepest nesting of arrays and objects in one export line: a converted case nests it a few levels
deeper and must still load (the YAML reader allows 64)."""
DEFAULT_MAX_EXPORT_BYTES = 16 * 1024 * 1024  # evaltrack.yaml `bounds.max_trajectory_bytes` overrides

_HEADER_HINT = (
    f'the first line must be the export header {{"format": "{EXPORT_FORMAT}", "version": {EXPORT_VERSION}, '
    '"redacted": true, ...}: convert the redacted export, never the raw event log'
)


# --- problems ------------------------------------------------------------------------------------


def _problem(path: str, line: int, message: str) -> Problem:
    """One reason an export is refused; `line` is 1-based (0: the file as a whole)."""
    return Problem(path, "", message, line)


class ExportRefused(ProblemsFound):
    """The export cannot be converted; str() is one `path:line: message` line per problem.

    Raised before anything is written: a refused conversion writes nothing.
    """


# --- reading the export --------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedCall:
    """A tool call as recorded: its name, canonical arguments and the result the agent saw."""

    tool: str
    arguments: str
    result: str


@dataclass(frozen=True)
class Trajectory:
    """The replayable content of one exported trajectory (everything else in the line is dropped)."""

    line: int
    task: str
    title: str
    input: tuple[tuple[str, str], ...]  # (role, content) up to the agent's first turn
    tools: tuple[dict[str, Any], ...]  # OpenAI tools schema
    calls: tuple[RecordedCall, ...]  # in recording order
    model_turns: int  # assistant messages in the recording (one model call each)


def credential_findings(text: str) -> list[str]:
    """What the one redaction (`eval_assets.redact`) would remove from `text`: its shape labels and
    the names of the credential variables whose values appear, never the value. A match refuses the
    whole export: the redactor missed something, and a converted case is checked in."""
    return redact.findings(text)


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def _foreign_keys(node: Any, where: str, names: frozenset[str]) -> list[str]:
    """Keys in a pass-through JSON object (a tool's parameter schema) a converted case may not hold."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if str(key).lower() in names or str(key).lower() == "id":
                found.append(f"{where}.{key}")
            found += _foreign_keys(value, f"{where}.{key}", names)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _foreign_keys(value, f"{where}.{i}", names)
    return found


class _LineProblems(Exception):
    def __init__(self, messages: list[str]):
        self.messages = messages


def _tool_schema(raw: Any, index: int, names: frozenset[str]) -> dict[str, Any]:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise _LineProblems([f"tools.{index}: expected an object with a string `name`"])
    name = raw["name"]
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
        raise _LineProblems([f"tools.{index}: tool name {name!r} must match [A-Za-z0-9_-]{{1,64}}"])
    description = raw.get("description", "")
    parameters = raw.get("parameters", {"type": "object", "properties": {}})
    problems = []
    if not isinstance(description, str):
        problems.append(f"tools.{index}.description: expected a string")
    if not isinstance(parameters, dict):
        problems.append(f"tools.{index}.parameters: expected a JSON schema object")
    else:
        problems += [
            f"tool {name!r}: {path}: a converted case may not hold a field named like a raw-log field "
            "(timestamp, id, usage, cost); rename the parameter in the export"
            for path in _foreign_keys(parameters, "parameters", names)
        ]
    if problems:
        raise _LineProblems(problems)
    function: dict[str, Any] = {"name": name}
    if description:
        function["description"] = description
    function["parameters"] = parameters
    return {"type": "function", "function": function}


def _result_text(raw: Any) -> str:
    """A recorded result: `{"content": str, ...}` (other keys, e.g. timing, are dropped) or a string."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict) and isinstance(raw.get("content"), str):
        return str(raw["content"])
    raise ValueError("expected `result` with a string `content` (the text the agent saw)")


def _trajectory(data: Any, line: int, names: frozenset[str]) -> Trajectory:
    if not isinstance(data, dict):
        raise _LineProblems([f"expected a JSON object (one trajectory), got {type(data).__name__}"])
    if "format" in data:
        raise _LineProblems(["a second export header: an export has one header, on line 1"])
    problems: list[str] = []
    task = data.get("task", "")
    title = data.get("title", "")
    if not isinstance(task, str) or not isinstance(title, str):
        problems.append("`task` and `title` must be strings")
    raw_tools = data.get("tools", [])
    tools: list[dict[str, Any]] = []
    if not isinstance(raw_tools, list):
        problems.append("tools: expected a list")
        raw_tools = []
    else:
        for i, raw in enumerate(raw_tools):
            try:
                tools.append(_tool_schema(raw, i, names))
            except _LineProblems as exc:
                problems += exc.messages
    # names of every tool listed, valid or not: a bad schema is one problem, not one per call to it
    offered = [r["name"] for r in raw_tools if isinstance(r, dict) and isinstance(r.get("name"), str)]
    if len(set(offered)) != len(offered):
        problems.append(
            f"tools: duplicate tool names: {', '.join(sorted({n for n in offered if offered.count(n) > 1}))}"
        )
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _LineProblems([*problems, "messages: expected a non-empty list"])
    inputs: list[tuple[str, str]] = []
    calls: list[RecordedCall] = []
    turns = 0
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, dict):
            problems.append(f"{where}: expected an object")
            continue
        role = message.get("role")
        if role == "tool":
            problems.append(
                f"{where}: a `tool` message: recorded results belong in the assistant's tool_calls[].result"
            )
            continue
        if role not in ("system", "user", "assistant"):
            problems.append(f"{where}.role: expected system, user or assistant, not {role!r}")
            continue
        if role == "assistant":
            turns += 1
            for j, call in enumerate(message.get("tool_calls") or []):
                at = f"{where}.tool_calls.{j}"
                if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                    problems.append(f"{at}: expected an object with a string `name`")
                    continue
                if call["name"] not in offered:
                    problems.append(
                        f"{at}: calls {call['name']!r}, which the trajectory's `tools` do not offer"
                    )
                    continue
                try:
                    arguments = canonical_arguments(call.get("arguments", {}))
                except ValueError as exc:
                    problems.append(f"{at}.arguments: {exc}")
                    continue
                if "result" not in call:
                    problems.append(f"{at}: no recorded `result`: a call without one cannot be replayed")
                    continue
                try:
                    calls.append(RecordedCall(call["name"], arguments, _result_text(call["result"])))
                except ValueError as exc:
                    problems.append(f"{at}.result: {exc}")
            continue
        if turns == 0:  # the input: everything before the agent's first turn
            content = message.get("content")
            if not isinstance(content, str) or not content.strip():
                problems.append(f"{where}.content: expected non-empty text")
            else:
                inputs.append((role, content))
    if not any(role == "user" for role, _ in inputs):
        problems.append("messages: no user message before the agent's first turn")
    if turns == 0:
        problems.append("messages: the agent never took a turn (no assistant message)")
    if problems:
        raise _LineProblems(problems)
    return Trajectory(line, task, title, tuple(inputs), tuple(tools), tuple(calls), turns)


def _depth_over(data: Any, limit: int) -> bool:
    """Whether JSON data nests arrays/objects deeper than `limit` (iterative: no recursion)."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))
    return False


def read_export(path: Path, shown: str | None = None, max_bytes: int | None = None) -> list[Trajectory]:
    """Parse and check a redacted export; raise ExportRefused listing every problem by line.

    Refused: a file over `max_bytes` (default DEFAULT_MAX_EXPORT_BYTES), a missing or false redaction
    header, any credential-shaped text (in the raw line or in any decoded string), malformed JSON,
    JSON nested deeper than MAX_JSON_DEPTH, and trajectories that cannot be replayed. Reads only.
    """
    shown = shown or str(path)
    cap = DEFAULT_MAX_EXPORT_BYTES if max_bytes is None else max_bytes
    try:
        text = read_capped(path, cap, "export").decode("utf-8-sig")
    except ValueError as exc:  # over the cap (or not UTF-8): refused before anything is parsed
        why = f"{exc} (bounds.max_trajectory_bytes in evaltrack.yaml)" if "cap" in str(exc) else str(exc)
        raise ExportRefused([_problem(shown, 0, f"cannot read the export: {why}")]) from None
    except OSError as exc:
        raise ExportRefused([_problem(shown, 0, f"cannot read the export: {exc}")]) from None
    problems: list[Problem] = []
    names = RAW_LOG_FIELDS
    trajectories: list[Trajectory] = []
    header_seen = False
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        data: Any = None
        parse_error: str | None = None
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            parse_error = f"not valid JSON: {exc.msg} (column {exc.colno})"
        except RecursionError:
            parse_error = f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
        if parse_error is None and _depth_over(data, MAX_JSON_DEPTH):
            data, parse_error = None, f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
        found = credential_findings(line)
        for value in _strings(data):
            found += [f for f in credential_findings(value) if f not in found]
        problems += [
            _problem(shown, number, f"looks like a credential ({label}); redact it and export again")
            for label in found
        ]
        if not header_seen:
            header_seen = True
            if not (
                isinstance(data, dict)
                and data.get("format") == EXPORT_FORMAT
                and data.get("version") == EXPORT_VERSION
                and data.get("redacted") is True
            ):
                why = "the export is not marked redacted" if isinstance(data, dict) else "no export header"
                problems.append(_problem(shown, number, f"{why}: {_HEADER_HINT}"))
            continue
        if parse_error is not None:
            problems.append(_problem(shown, number, parse_error))
            continue
        try:
            trajectories.append(_trajectory(data, number, names))
        except _LineProblems as exc:
            problems += [_problem(shown, number, m) for m in exc.messages]
    if not header_seen:
        problems.append(_problem(shown, 0, f"the export is empty: {_HEADER_HINT}"))
    elif not trajectories and not problems:
        problems.append(_problem(shown, 0, "the export holds no trajectory"))
    if problems:
        raise ExportRefused(problems)
    return trajectories


# --- converting ----------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "trajectory"


def case_id(trajectory: Trajectory) -> str:
    """`converted.<task>-<hash>`: the hash covers the task, input, tools and recorded calls only."""
    content = canonical_json(
        {
            "task": trajectory.task,
            "input": [list(m) for m in trajectory.input],
            "tools": list(trajectory.tools),
            "replay": [[c.tool, c.arguments, c.result] for c in trajectory.calls],
        }
    )
    digest = hashlib.sha256(content.encode("utf-8")).hexdigest()[:HASH_CHARS]
    return f"{ID_PREFIX}{_slug(trajectory.task)}-{digest}"


def _description(trajectory: Trajectory) -> str:
    text = trajectory.title.strip() or next(c for r, c in trajectory.input if r == "user").strip()
    first = " ".join(text.splitlines()[0].split()) if text else "a recorded trajectory"
    if len(first) > 120:
        first = first[:117].rstrip() + "..."
    return f"Converted trajectory: {first}"


def scenario_data(trajectory: Trajectory, *, judge: str, suite: str) -> dict[str, Any]:
    """The scenario mapping for one trajectory, in file order. Never holds assertions; its policy is
    the project's baseline (BASELINE_FORBIDDEN), never anything taken from the recording."""
    replay: list[dict[str, str]] = []
    seen: set[tuple[str, str, str]] = set()
    for call in trajectory.calls:  # an identical recording twice is one entry; different results stay
        if (call.tool, call.arguments, call.result) not in seen:
            seen.add((call.tool, call.arguments, call.result))
            replay.append({"tool": call.tool, "arguments": call.arguments, "result": call.result})
    data: dict[str, Any] = {
        "id": case_id(trajectory),
        "suite": suite,
        "description": _description(trajectory),
        "judge": judge,
        "source": "trajectory",
        "max_turns": min(MAX_TURNS_LIMIT, max(DEFAULT_MAX_TURNS, trajectory.model_turns + 2)),
        "input": [{"role": role, "content": content} for role, content in trajectory.input],
        "policy": {"forbidden_strings": list(BASELINE_FORBIDDEN)},
    }
    if trajectory.tools:
        data["tools"] = [dict(t) for t in trajectory.tools]
    if replay:
        data["replay"] = replay
    return data


class _Dumper(yaml.SafeDumper):
    """Block style, multi-line text as literal blocks: stable, readable files."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and value == value.strip(" ") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)

FILE_HEADER = """\
# Converted by `evaltrack trajectory convert` from a redacted trajectory export (docs/trajectory-export.md).
# source: trajectory. Tool calls are answered from `replay` (recorded results), never executed.
# Awaiting assertions: this case never blocks a release until a person adds an `assertions:` block
# (docs/specs/deterministic-suite.md, "Cases"). Assertions are never generated; re-converting never
# overwrites a file that has them.
"""


def render(data: Mapping[str, Any]) -> str:
    """The scenario file's text: the header comment and deterministic YAML (same data, same bytes)."""
    body = yaml.dump(
        dict(data), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=4096, default_flow_style=False
    )
    return FILE_HEADER + body


@dataclass(frozen=True)
class ConversionReport:
    """What a conversion did. `written`/`unchanged`/`kept` are file names under the output directory;
    `kept` had assertions and was left alone; `duplicates` are (line, case id) of repeated content."""

    trajectories: int
    cases: tuple[str, ...]
    written: tuple[str, ...]
    unchanged: tuple[str, ...]
    kept: tuple[str, ...]
    duplicates: tuple[tuple[int, str], ...] = field(default=())

    def text(self) -> str:
        lines = [
            f"{self.trajectories} trajectories -> {len(self.cases)} converted case(s): "
            f"{len(self.written)} written, {len(self.unchanged)} unchanged, {len(self.kept)} kept (has assertions)"
        ]
        lines += [f"  line {line}: same content as {cid} (one case)" for line, cid in self.duplicates]
        lines += [f"  kept {name}: a person added assertions; delete it to re-convert" for name in self.kept]
        return "\n".join(lines)


def _has_assertions(path: Path) -> bool:
    """Whether an existing case file has assertions; raises YamlRefused when it cannot be read (then it
    is never overwritten: a person may have written something the reader refuses)."""
    data = read_yaml_file(path)  # the one YAML reader
    return isinstance(data, dict) and data.get("assertions") is not None


def convert_export(
    export: Path,
    out_dir: Path,
    *,
    judge: str = DEFAULT_JUDGE,
    suite: str = DEFAULT_SUITE,
    known_judges: Sequence[str] | None = None,
    max_bytes: int | None = None,
) -> ConversionReport:
    """Convert every trajectory of `export` into `out_dir/<case id>.yaml`; all or nothing.

    Promises: raises ExportRefused (and writes nothing, not even `out_dir`) when the export is refused
    (see `read_export`), when `judge` is not in `known_judges` (if given), or when a scenario would not
    validate; writes the same bytes for the same export; one file per distinct content; never writes
    assertions and never touches an existing file that has them; every file written is renamed into
    place only after all of them were rendered and validated.
    """
    shown = str(export)
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportRefused(
            [_problem(str(out_dir), 0, "--out is an existing file, not a directory: nothing was overwritten")]
        )
    trajectories = read_export(export, shown, max_bytes)
    if known_judges is not None and judge not in known_judges:
        known = ", ".join(sorted(known_judges)) or "none"
        raise ExportRefused([_problem(shown, 0, f"unknown judge {judge!r} (active judges: {known})")])
    rendered: dict[str, str] = {}
    duplicates: list[tuple[int, str]] = []
    problems: list[Problem] = []
    for trajectory in trajectories:
        data = scenario_data(trajectory, judge=judge, suite=suite)
        name = f"{data['id']}.yaml"
        if name in rendered:
            duplicates.append((trajectory.line, str(data["id"])))
            continue
        _, found = validate_model(Scenario, data, name)
        problems += [_problem(shown, trajectory.line, f"{p.field}: {p.message}") for p in found]
        rendered[name] = render(data)
        problems += [  # the file itself, as written: nothing in it may be something the redaction removes
            _problem(shown, trajectory.line, f"the converted case would hold a credential ({label})")
            for label in credential_findings(rendered[name])
        ]
        try:  # what is written must be what the project can read back
            if len(rendered[name].encode("utf-8")) > MAX_YAML_BYTES:
                raise YamlRefused([("<file>", f"the case would be over {MAX_YAML_BYTES} bytes")])
            parse_yaml(rendered[name])
        except YamlRefused as exc:
            problems.append(_problem(shown, trajectory.line, f"the converted case would not load: {exc}"))
    written, unchanged, kept = [], [], []
    to_write: list[tuple[str, str]] = []
    for name, text in sorted(rendered.items()):
        target = out_dir / name
        try:
            check_target(target)
            if not target.exists():
                to_write.append((name, text))
                continue
            if target.read_bytes() == text.encode("utf-8"):
                unchanged.append(name)
            elif _has_assertions(target):
                kept.append(name)
            else:
                to_write.append((name, text))
        except (OSError, YamlRefused) as exc:
            problems.append(_problem(str(target), 0, f"exists and cannot be read ({exc}): not overwritten"))
    if problems:
        raise ExportRefused(problems)
    write_files([(out_dir / name, text) for name, text in to_write])
    written += [name for name, _ in to_write]
    return ConversionReport(
        trajectories=len(trajectories),
        cases=tuple(sorted(n.removesuffix(".yaml") for n in rendered)),
        written=tuple(written),
        unchanged=tuple(unchanged),
        kept=tuple(kept),
        duplicates=tuple(duplicates),
    )
