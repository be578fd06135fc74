"""A build's report as one self-contained HTML file: what a reviewer reads and a pull request attaches.

The decision and its reasons; each judge version's capability report (findings and plot); one row
per scenario (repeat scores per judge version, pass^k, flags) that opens onto its attempts; and per
attempt its transcript: the input messages, every model turn (text and tool calls, as the journal
holds them; for an agent attempt its trajectory: per call what the agent sent, its own system prompt
and the tool results it sent back included, the model's reply and tool calls, latency, tokens and
cost, then the agent's notes), the output as stored, and each judge version's verdict with the
judge's own reply as rationale. Everything shown passes through the one redaction first; the page needs no network (the
plots are data: URIs, the filter is a few lines of inline script).
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_assets.capability.baselines import build_reliability
from eval_assets.capability.track import Track
from eval_assets.human_scores import agreement_markdown
from eval_assets.present import SEVERITY_HEADINGS, grouped_reasons, png_data_uri
from eval_assets.redact import redact, values_read_once
from eval_assets.safe_write import write_file
from eval_assets.spend import TURN_STRIDE, JournalRow, read_payload
from eval_assets.stats import Reliability, shown_figure

# a scenario's filter status, worst first
STATUS_ORDER = ("block", "investigate", "error", "fail", "unknown", "pass")


@dataclass
class Attempt:
    """One scenario × repeat: its stored run row, its model turns and its verdicts per judge version."""

    repeat: int
    run: Mapping[str, Any]
    turns: list[tuple[int, str | None, list[Any] | None]] = field(default_factory=list)
    verdicts: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    rationales: dict[str, str | None] = field(default_factory=dict)


@dataclass
class ScenarioView:
    scenario_id: str
    suite: str
    attempts: list[Attempt]
    flags: dict[str, str]  # judge version -> block / investigate (from its capability report)
    # judge version scoring it -> the scenario's pass@k and pass^k (the one definition,
    # `stats.reliability`); None: no figures (an excluded scenario, or a retired judge version)
    passes: dict[str, Reliability | None]

    @property
    def status(self) -> str:
        """block / investigate (a report flagged it), error (an attempt errored), fail (pass^k is 0
        under some judge version: a repeat failed), unknown (pass^k is unknown under one: the judge
        could not score a repeat, none failed), else pass."""
        flagged = set(self.flags.values())
        for verdict in ("block", "investigate"):
            if verdict in flagged:
                return verdict
        if any(a.run.get("status") != "ok" for a in self.attempts):
            return "error"
        hats = [r.pass_hat_k for r in self.passes.values() if r is not None]
        if any(h == 0.0 for h in hats):
            return "fail"
        return "unknown" if any(h is None for h in hats) else "pass"


def _latest(rows: Iterable[JournalRow]) -> dict[tuple[str | None, str, int, int], JournalRow]:
    """Per (judge version, scenario, repeat, turn): the settled try of the newest generation."""
    out: dict[tuple[str | None, str, int, int], JournalRow] = {}
    for row in rows:
        if row.status != "settled":
            continue
        key = (row.judge_version, row.scenario_id, row.repeat, row.try_no // TURN_STRIDE + 1)
        held = out.get(key)
        if held is None or (row.generation, row.try_no) > (held.generation, held.try_no):
            out[key] = row
    return out


def _records(track: Track, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    """The rows of `sql`, a NaN (a float no statistic could give) shown as missing, like NULL."""
    return [{k: (None if v != v else v) for k, v in r.items()} for r in track.warehouse.rows(sql, params)]


def collect(track: Track, build: str) -> tuple[list[str], list[ScenarioView]]:
    """The judge versions with verdicts for `build` and its scenarios, in id order."""
    runs = _records(
        track, "SELECT * FROM scenario_runs WHERE build = ? ORDER BY scenario_id, repeat", [build]
    )
    verdicts = _records(
        track,
        "SELECT * FROM judge_verdicts WHERE build = ? ORDER BY judge_version, scenario_id, repeat",
        [build],
    )
    findings = _records(
        track,
        "SELECT judge_version, scenario_id, verdict FROM capability_reports "
        "WHERE build = ? AND scenario_id IS NOT NULL AND verdict IN ('block', 'investigate')",
        [build],
    )
    versions = sorted({str(v["judge_version"]) for v in verdicts})
    subject = _latest(track.journal.rows(build=build, role="subject"))
    judged = _latest(track.journal.rows(build=build, role="judge"))
    turns_of: dict[tuple[str, int], list[tuple[int, JournalRow]]] = {}
    for (_jv, sid, repeat, turn), row in subject.items():
        turns_of.setdefault((sid, repeat), []).append((turn, row))
    attempts: dict[str, list[Attempt]] = {}
    suites: dict[str, str] = {}
    for run in runs:
        sid, repeat = str(run["scenario_id"]), int(run["repeat"])
        suites[sid] = str(run.get("suite") or "")
        turns = sorted(turns_of.get((sid, repeat), []), key=lambda tr: tr[0])
        attempts.setdefault(sid, []).append(
            Attempt(repeat, run, [(t, *read_payload(r.payload)) for t, r in turns])
        )
    by_attempt = {(str(a.run["scenario_id"]), a.repeat): a for sid in attempts for a in attempts[sid]}
    for v in verdicts:
        judged_attempt = by_attempt.get((str(v["scenario_id"]), int(v["repeat"])))
        if judged_attempt is None:
            continue
        jv = str(v["judge_version"])
        judged_attempt.verdicts[jv] = v
        reply = judged.get((jv, str(v["scenario_id"]), int(v["repeat"]), 1))
        judged_attempt.rationales[jv] = read_payload(reply.payload)[0] if reply is not None else None
    flags: dict[str, dict[str, str]] = {}
    for f in findings:
        held = flags.setdefault(str(f["scenario_id"]), {}).get(str(f["judge_version"]))
        if held != "block":
            flags[str(f["scenario_id"])][str(f["judge_version"])] = str(f["verdict"])
    figures = {
        jv: {f.name: f for f in build_reliability(track, build, jv) if f.scope == "scenario"}
        for jv in versions
        if jv in track.project.judges
    }
    views = []
    for sid in sorted(attempts):
        passes: dict[str, Reliability | None] = {}
        for jv in versions:
            if all(a.verdicts.get(jv) is None for a in attempts[sid]):
                continue  # this judge version does not score the scenario
            passes[jv] = figures.get(jv, {}).get(sid)
        views.append(ScenarioView(sid, suites[sid], attempts[sid], flags.get(sid, {}), passes))
    return versions, views


# --- rendering -------------------------------------------------------------------------------------

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1b1f24;max-width:1400px}
h1{font-size:22px} h2{font-size:18px;margin-top:28px} h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0} th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa} .decision{display:inline-block;padding:2px 10px;border-radius:10px;color:#fff;font-weight:600}
.d-allow{background:#1a7f37} .d-block{background:#cf222e} .d-investigate{background:#bf8700} .d-none{background:#6e7781}
.s-block{color:#cf222e;font-weight:600} .s-investigate{color:#bf8700;font-weight:600} .s-error{color:#8250df}
.s-fail{color:#953800} .s-pass{color:#1a7f37}
details.scenario{border:1px solid #d0d7de;border-radius:6px;margin:6px 0;padding:4px 8px}
details.attempt{margin:6px 0 6px 16px;border-left:3px solid #d0d7de;padding-left:8px}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:6px;border-radius:4px;margin:4px 0;max-height:20em;overflow:auto}
.call{border-top:1px solid #d0d7de;margin-top:6px;padding-top:4px} .call .head{font-weight:600}
.sent{margin-left:12px} .tool{border-left:3px solid #8250df;padding-left:6px}
.role{font-weight:600;color:#57606a} .na{color:#8c959f} img{max-width:100%}
#filters{position:sticky;top:0;background:#fff;padding:6px 0;border-bottom:1px solid #d0d7de}
"""

_SCRIPT = """
function applyFilter(){
  var s=document.getElementById('f-scenario').value, t=document.getElementById('f-status').value, n=0;
  document.querySelectorAll('[data-scenario]').forEach(function(e){
    var show=(!s||e.dataset.scenario===s)&&(!t||e.dataset.status===t);
    e.style.display=show?'':'none'; if(show&&e.tagName==='DETAILS')n++;});
  document.getElementById('f-count').textContent=n+' scenario(s) shown';
}
"""


def shown(value: Any) -> str:
    """Redacted, then escaped: the only way a stored value reaches the page."""
    return html.escape(redact("" if value is None else str(value)))


def _score(value: Any) -> str:
    return "–" if value is None else f"{float(value):.2f}"


def _decision_html(build: str, decision: Mapping[str, Any] | None, rows: Sequence[Mapping[str, Any]]) -> str:
    word = str(decision["decision"]) if decision else "none"
    head = "no decision" if word == "none" else word
    baseline = (decision or {}).get("baseline") or "none"
    out = [
        f'<h1>{shown(build)} <span class="decision d-{shown(word)}" id="decision">{shown(head)}</span></h1>',
        f"<p>baseline: {shown(baseline)}</p>",
    ]
    if decision is None:
        out.append("<p>No decision is recorded for this build.</p>")
    titles = dict(SEVERITY_HEADINGS)
    for severity, sources in grouped_reasons(rows):
        out.append(f'<h3 class="s-{shown(severity)}">{shown(titles.get(severity, severity))}</h3>')
        for source, lines in sources:
            out.append(
                f"<p><b>{shown(source)}</b></p><ul>"
                + "".join(f"<li>{shown(x)}</li>" for x in lines)
                + "</ul>"
            )
    return "\n".join(out)


def _reports_html(track: Track, build: str, versions: Sequence[str]) -> str:
    out = ['<h2 id="reports">Capability reports</h2>']
    for jv in versions:
        rows = _records(
            track,
            "SELECT finding, scenario_id, verdict, statistic, q_value, detail FROM capability_reports "
            "WHERE build = ? AND judge_version = ? ORDER BY verdict, finding, scenario_id",
            [build, jv],
        )
        out.append(f"<h3>{shown(jv)}</h3>")
        image = png_data_uri(track.home.reports(build) / f"{jv}.png")
        if image:
            out.append(f'<img alt="capability report {shown(jv)}" src="{image}">')
        if rows:
            out.append(
                "<table><tr><th>finding</th><th>scenario</th><th>verdict</th><th>statistic</th><th>q</th><th>detail</th></tr>"
            )
            for r in rows:
                out.append(
                    f"<tr><td>{shown(r['finding'])}</td><td>{shown(r['scenario_id'] or 'suite')}</td>"
                    f'<td class="s-{shown(r["verdict"])}">{shown(r["verdict"])}</td><td>{_score(r["statistic"])}</td>'
                    f"<td>{_score(r['q_value'])}</td><td>{shown(r['detail'])}</td></tr>"
                )
            out.append("</table>")
        else:
            out.append("<p>No report was made under this judge version.</p>")
        agreement = agreement_markdown(track.warehouse, jv).replace("**", "").splitlines()
        out += [f'<p class="agreement">{shown(line)}</p>' for line in agreement]
    return "\n".join(out)


def _scenario_table(versions: Sequence[str], views: Sequence[ScenarioView]) -> str:
    head = "".join(f"<th>{shown(jv)}: repeat scores</th><th>pass@k, pass^k</th>" for jv in versions)
    out = [
        f'<table id="scenario-table"><tr><th>scenario</th><th>suite</th><th>status</th>{head}<th>flags</th></tr>'
    ]
    for v in views:
        cells = ""
        for jv in versions:
            if jv not in v.passes:
                cells += '<td class="na">not judged</td><td class="na">–</td>'
                continue
            scores = " ".join(_score(a.verdicts.get(jv, {}).get("score")) for a in v.attempts)
            cells += f"<td>{scores}</td><td>{shown(_pass_k(v.passes[jv]))}</td>"
        flags = [f"{jv}: {f}" for jv, f in sorted(v.flags.items())]
        policy = sum(int(a.run.get("policy_failures") or 0) for a in v.attempts)
        errors = sum(1 for a in v.attempts if a.run.get("status") != "ok")
        flags += [f"{policy} policy failures"] if policy else []
        flags += [f"{errors} errors"] if errors else []
        out.append(
            f'<tr data-scenario="{shown(v.scenario_id)}" data-status="{v.status}"><td><a href="#s-{shown(v.scenario_id)}">'
            f'{shown(v.scenario_id)}</a></td><td>{shown(v.suite)}</td><td class="s-{v.status}">{v.status}</td>{cells}'
            f"<td>{shown(', '.join(flags))}</td></tr>"
        )
    out.append("</table>")
    return "\n".join(out)


def _pass_k(figure: Reliability | None) -> str:
    """A scenario's pass@k and pass^k as the page shows them, e.g. `pass@5 100%, pass^5 unknown (3 of 5
    passed, 2 the judge could not score)`."""
    if figure is None:
        return "no figures (excluded: stopped by a ceiling)"
    unjudged = f", {figure.unknown} the judge could not score" if figure.unknown else ""
    return (
        f"pass@{figure.k} {shown_figure(figure.pass_at_k)}, pass^{figure.k} {shown_figure(figure.pass_hat_k)} "
        f"({figure.passed} of {figure.k} passed{unjudged})"
    )


def _messages(track: Track, scenario_id: str) -> str:
    scenario = track.project.scenarios.get(scenario_id)
    if scenario is None:
        return "<p>(the scenario is no longer in the project: its input is not shown)</p>"
    return "".join(
        f'<div><span class="role">{shown(m.role)}</span><pre>{shown(m.content)}</pre></div>'
        for m in scenario.input
    )


def _attempt_html(view: ScenarioView, attempt: Attempt, versions: Sequence[str], messages: str) -> str:
    """One attempt's details; `messages` is its scenario's input (`_messages`), drawn once per scenario."""
    run = attempt.run
    summary = f"repeat {attempt.repeat} · {shown(run.get('status'))}" + "".join(
        f" · {shown(jv)}: {_score(attempt.verdicts.get(jv, {}).get('score'))}"
        for jv in versions
        if jv in view.passes
    )
    out = [
        f'<details class="attempt"><summary>{summary}</summary>',
        "<h4>Input</h4>",
        messages,
    ]
    trajectory = _trajectory(run.get("trajectory"))
    if trajectory is not None:
        out.append(_trajectory_html(trajectory))
    elif len(attempt.turns) > 1 or any(calls for _t, _x, calls in attempt.turns):
        out.append("<h4>Turns and tool calls</h4>")
        for turn, text, calls in attempt.turns:
            out.append(f'<div><span class="role">assistant, turn {turn}</span><pre>{shown(text)}</pre>')
            if calls:
                out.append(
                    f"<div>tool calls:</div><pre>{shown(json.dumps(calls, indent=1, sort_keys=True))}</pre>"
                )
            out.append("</div>")
    out.append("<h4>Output</h4>")
    out.append(
        f"<pre>{shown(run.get('output'))}</pre>" if run.get("output") is not None else "<p>(no output)</p>"
    )
    facts = [
        f"policy failures {run.get('policy_failures') or 0}",
        f"tries {run.get('tries')}",
        f"turns {run.get('turns')}",
        f"replay misses {run.get('replay_misses') or 0}",
        f"latency {float(run.get('latency_s') or 0.0):.2f} s",
        f"tokens {int(run.get('prompt_tokens') or 0)} in / {int(run.get('completion_tokens') or 0)} out",
        f"cost ${float(run.get('cost_usd') or 0.0):.6f}",
    ]
    if run.get("error"):
        facts.append(f"error ({run.get('error_kind')}): {run.get('error')}")
    out.append(f"<p>{shown(' · '.join(facts))}</p>")
    for jv in versions:
        v = attempt.verdicts.get(jv)
        if v is None:
            if jv in view.passes:  # the version scores this scenario but has no verdict on this attempt
                out.append(f"<h4>Verdict {shown(jv)}</h4><p>(no verdict)</p>")
            continue
        detail = f"{v.get('status')} · score {_score(v.get('score'))}"
        if v.get("failure_reason"):
            detail += f" · {v.get('failure_reason')}"
        out.append(f"<h4>Verdict {shown(jv)}</h4><p>{shown(detail)}</p>")
        if v.get("criteria"):
            out.append(f"<div>criteria:</div><pre>{shown(v.get('criteria'))}</pre>")
        rationale = attempt.rationales.get(jv)
        out.append(
            f'<div>rationale (the judge\'s reply):</div><pre class="rationale">{shown(rationale)}</pre>'
            if rationale
            else "<p>(no judge reply in the journal)</p>"
        )
    out.append("</details>")
    return "\n".join(out)


def _trajectory(text: Any) -> dict[str, Any] | None:
    """An agent attempt's stored trajectory (None for a model subject's attempt, or unreadable)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("calls"), list) else None


def _message_html(message: Any) -> str:
    """One message the agent sent: its role (and tool call id), its text, its own tool calls."""
    if not isinstance(message, dict):
        return f"<pre>{shown(message)}</pre>"
    role = str(message.get("role"))
    label = role + (f" (result of {message.get('tool_call_id')})" if role == "tool" else "")
    content = message.get("content")
    if not isinstance(content, str) and content is not None:
        content = json.dumps(content, indent=1, sort_keys=True)
    out = f'<div class="{"tool" if role == "tool" else "msg"}"><span class="role">{shown(label)}</span>'
    if content is not None:
        out += f"<pre>{shown(content)}</pre>"
    if message.get("tool_calls"):
        out += f"<div>its tool calls:</div><pre>{shown(_calls_text(message['tool_calls']))}</pre>"
    return out + "</div>"


def _calls_text(calls: Any) -> str:
    """Tool calls one a line, `name(arguments)  [id]`, in the OpenAI wire shape or the trajectory's."""
    if not isinstance(calls, list):
        return json.dumps(calls, sort_keys=True)
    lines = []
    for c in calls:
        if not isinstance(c, dict):
            lines.append(json.dumps(c, sort_keys=True))
            continue
        wire = c.get("function")
        fn: dict[str, Any] = wire if isinstance(wire, dict) else c
        lines.append(f"{fn.get('name')}({fn.get('arguments') or ''})  [{c.get('id')}]")
    return "\n".join(lines)


def _trajectory_html(trajectory: Mapping[str, Any]) -> str:
    """Every call of an agent attempt: what the agent sent (the first call: every message, its system
    prompt included; then the tool results and turns it added), the reply, latency, tokens, cost."""
    out = [f"<h4>Agent calls ({len(trajectory['calls'])})</h4>"]
    for call in trajectory["calls"]:
        if not isinstance(call, dict):
            continue
        facts = [
            f"call {call.get('index')}",
            str(call.get("status")),
            f"latency {float(call.get('latency_s') or 0.0):.2f} s",
            f"tokens {int(call.get('prompt_tokens') or 0)} in / {int(call.get('completion_tokens') or 0)} out",
            f"cost ${float(call.get('cost_usd') or 0.0):.6f}",
            f"tries {call.get('tries')}",
        ]
        if call.get("reused"):
            facts.append("reused from the journal")
        out.append(f'<div class="call"><div class="head">{shown(" · ".join(facts))}</div>')
        sent = call.get("sent") or []
        out.append(f'<div class="sent"><div>sent by the agent ({len(sent)}):</div>')
        out += [_message_html(m) for m in sent]
        out.append("</div>")
        if call.get("error"):
            out.append(f"<p>error ({shown(call.get('error_kind'))}): {shown(call.get('error'))}</p>")
        if call.get("text") is not None or call.get("tool_calls"):
            out.append(f'<span class="role">model reply</span><pre>{shown(call.get("text"))}</pre>')
        if call.get("tool_calls"):
            out.append(f"<div>tool calls:</div><pre>{shown(_calls_text(call['tool_calls']))}</pre>")
        out.append("</div>")
    notes = trajectory.get("notes")
    out.append(
        f"<h4>Agent notes</h4><pre>{shown(notes)}</pre>" if notes else "<p>(no notes from the agent)</p>"
    )
    return "\n".join(out)


def render(
    track: Track, build: str, decision: Mapping[str, Any] | None, rows: Sequence[Mapping[str, Any]]
) -> str:
    """The whole report of `build` as one HTML document (redacted, no external resource).
    `decision`: its recorded decision row (None: none recorded); `rows`: the reasons to show."""
    with values_read_once():  # the page's ~13 fields per attempt, against one reading of the secrets
        return _render(track, build, decision, rows)


def _render(
    track: Track, build: str, decision: Mapping[str, Any] | None, rows: Sequence[Mapping[str, Any]]
) -> str:
    versions, views = collect(track, build)
    options = "".join(
        f'<option value="{shown(v.scenario_id)}">{shown(v.scenario_id)}</option>' for v in views
    )
    statuses = "".join(f'<option value="{s}">{s}</option>' for s in STATUS_ORDER)
    body = [
        _decision_html(build, decision, rows),
        _reports_html(track, build, versions),
        '<h2 id="scenarios">Scenarios</h2>',
        '<div id="filters">scenario <select id="f-scenario" onchange="applyFilter()"><option value="">all</option>'
        f'{options}</select> status <select id="f-status" onchange="applyFilter()"><option value="">all</option>'
        f'{statuses}</select> <span id="f-count">{len(views)} scenario(s) shown</span></div>',
        _scenario_table(versions, views),
        '<h2 id="transcripts">Transcripts</h2>',
    ]
    for v in sorted(views, key=lambda v: (STATUS_ORDER.index(v.status), v.scenario_id)):
        body.append(
            f'<details class="scenario" id="s-{shown(v.scenario_id)}" data-scenario="{shown(v.scenario_id)}" '
            f'data-status="{v.status}"><summary><b>{shown(v.scenario_id)}</b> · <span class="s-{v.status}">'
            f"{v.status}</span> · {len(v.attempts)} attempts</summary>"
        )
        messages = _messages(track, v.scenario_id)  # once per scenario: every attempt shares its input
        body += [_attempt_html(v, a, versions, messages) for a in v.attempts]
        body.append("</details>")
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{shown(build)}: eval-track report</title>'
        f"<style>{_STYLE}</style><script>{_SCRIPT}</script></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def write_html(text: str, path: Path) -> Path:
    """Write `text` to `path` atomically, only over a regular file or a new path (`safe_write`)."""
    return write_file(path, text)
