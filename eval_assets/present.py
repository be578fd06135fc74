"""How decisions, reasons and gate results read: markdown for the UI and pull requests, terminal tables.

Pure formatting over rows the warehouse already holds (`release_decision_reasons`, `gate_results`):
no Dagster here. The Dagster wiring passes in how to link a judge version's report and where its plot
is; the CLI prints the same reasons as a table or as markdown ready to paste into a pull request.
"""

from __future__ import annotations

import base64
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

SEVERITY_HEADINGS = (
    ("block", "Block"),
    ("investigate", "Investigate"),
    ("none", "No decision"),
    ("info", "Info"),
)
_JUDGE_SOURCE = re.compile(r"^judge (?P<version>\S+), (?P<candidate>\S+) vs (?P<baseline>\S+)$")

MAX_LINE = 200


def _dot(fill: str, stroke: str) -> str:
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" width="12" height="12" viewBox="0 0 12 12">'
        f'<circle cx="6" cy="6" r="5" fill="{fill}" stroke="{stroke}" stroke-width="2"/></svg>'
    )
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


# decision → (the colour a reader sees, its mark as an image the UI's markdown draws: emoji render as
# empty boxes in a headless browser); none is a hollow ring, never the red or amber of a finding
DECISION_COLOURS: dict[str, tuple[str, str]] = {
    "allow": ("#2f9e44", _dot("#2f9e44", "#2f9e44")),
    "investigate": ("#f2a900", _dot("#f2a900", "#f2a900")),
    "block": ("#d9342b", _dot("#d9342b", "#d9342b")),
    "none": ("#868e96", _dot("#ffffff", "#868e96")),
}


def judge_of(source: str) -> str | None:
    """The judge version a reason's source names (`judge V, cand vs base`), else None."""
    match = _JUDGE_SOURCE.match(source)
    return match["version"] if match else None


def source_heading(source: str) -> str:
    """`judge V, cand vs base` → `V (cand vs base)`; any other source as it is."""
    match = _JUDGE_SOURCE.match(source)
    return f"{match['version']} ({match['candidate']} vs {match['baseline']})" if match else source


def _reason_line(row: Mapping[str, Any]) -> str:
    text = str(row.get("message") or "").strip()
    advice = row.get("advice")
    return f"{text} — {advice}" if advice else text


def grouped_reasons(rows: Iterable[Mapping[str, Any]]) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """[(severity, [(source, [reason lines])])], severities in SEVERITY_HEADINGS order, sources in
    first-seen order. Unknown severities are kept (after the known ones), never dropped."""
    by_severity: dict[str, dict[str, list[str]]] = {}
    for row in rows:
        severity = str(row.get("severity") or "unknown")
        by_severity.setdefault(severity, {}).setdefault(str(row.get("source") or "?"), []).append(
            _reason_line(row)
        )
    order = [s for s, _ in SEVERITY_HEADINGS] + sorted(set(by_severity) - {s for s, _ in SEVERITY_HEADINGS})
    return [(s, list(by_severity[s].items())) for s in order if s in by_severity]


def png_uri(png: bytes) -> str:
    """The data: URI of PNG bytes (a plot inlined in Markdown metadata or an HTML page)."""
    return "data:image/png;base64," + base64.b64encode(png).decode()


def png_data_uri(path: Path) -> str | None:
    """A data: URI of the PNG at `path` (None when it does not exist)."""
    if not path.is_file():
        return None
    return png_uri(path.read_bytes())


def reasons_markdown(
    build: str,
    decision: str,
    rows: Sequence[Mapping[str, Any]],
    *,
    report_link: Callable[[str], str | None] = lambda _jv: None,
    plot: Callable[[str], str | None] = lambda _jv: None,
) -> str:
    """The decision and its reasons, grouped by severity; within a severity, one heading per source.

    A judge version's heading links its capability report (`report_link(version)`); its plot
    (`plot(version)`, an image URL) is shown once, under the first heading naming that version.
    """
    head = "no decision" if decision == "none" else decision
    out = [f"## {build}: {head}", ""]
    if not rows:
        out.append("No reasons were recorded.")
    plotted: set[str] = set()
    for severity, sources in grouped_reasons(rows):
        title = dict(SEVERITY_HEADINGS).get(severity, severity)
        out += [f"### {title}", ""]
        for source, lines in sources:
            version = judge_of(source)
            heading = source_heading(source)
            link = report_link(version) if version else None
            out.append(f"#### [{heading}]({link})" if link else f"#### {heading}")
            out.append("")
            out += [f"- {line}" for line in lines]
            out.append("")
            image = plot(version) if version and version not in plotted else None
            if image:
                plotted.add(version or "")
                out += [f"![capability report {version}]({image})", ""]
    return "\n".join(out).rstrip() + "\n"


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ").strip()


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


_STATUS_ORDER = {"error": 0, "fail": 1, "awaiting_assertions": 2, "pending": 3, "pass": 4}


def gates_markdown(results: Iterable[Any]) -> str:
    """gate_results as a markdown table (gate, kind, milestone, status, detail), blocking rows first."""
    ordered = sorted(results, key=lambda r: (not r.blocks, _STATUS_ORDER.get(r.status, 5), r.gate_id))
    rows = []
    for r in ordered:
        flags = [f for f, on in (("retried", r.retried), ("quarantined", r.quarantined)) if on]
        status = f"**{r.status}**" if r.blocks else r.status
        detail = r.message + (f" ({', '.join(flags)})" if flags else "")
        rows.append(
            (
                f"`{r.gate_id}`",
                r.kind,
                "" if r.milestone is None else r.milestone,
                status,
                shorten(detail, 160),
            )
        )
    return markdown_table(("gate", "kind", "milestone", "status", "detail"), rows)


def terminal_width() -> int:
    """The width text output fits: the terminal's (or $COLUMNS), between MIN_WIDTH and MAX_LINE;
    MAX_LINE when stdout is not a terminal."""
    import shutil

    return max(MIN_WIDTH, min(MAX_LINE, shutil.get_terminal_size((MAX_LINE, 24)).columns))


MIN_WIDTH = 20
MIN_WRAPPED_COLUMN = 30  # narrower than this, a table's wrapped last column reads one word a line


def shorten(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def wrapped(text: str, width: int, indent: str = "") -> list[str]:
    """`text` on lines of at most `width`, words whole: an id or a path is never split (a line is
    longer than `width` only when one word is)."""
    return textwrap.wrap(
        " ".join(str(text).split()),
        width,
        initial_indent=indent,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent.rstrip()]


def text_table(
    header: Sequence[str], rows: Iterable[Sequence[Any]], width: int = MAX_LINE, *, wrap: bool = False
) -> str:
    """A plain-text table no line of which is longer than `width`: the last column is cut, or with
    `wrap` every cell is kept whole (reasons are read whole): the last column wraps under itself, and
    where the other columns leave it too little room each row is a block of its own (its first
    columns on one line, the last indented below), words never split."""
    rows = list(rows)
    if wrap:
        body = [[" ".join(_cell(v).split()) for v in row] for row in rows]
    else:
        body = [
            [shorten(_cell(v), width) for v in row[:-1]] + [" ".join(_cell(row[-1]).split())] for row in rows
        ]
    widths = [len(h) for h in header]
    for row in body:
        widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]
    fixed = sum(widths[:-1]) + 2 * (len(widths) - 1)
    if wrap and len(widths) > 1 and width - fixed < min(MIN_WRAPPED_COLUMN, widths[-1]):
        return _blocks(body, width)
    widths[-1] = max(len(header[-1]), min(widths[-1], width - fixed))

    def line(values: Sequence[str]) -> str:
        cells = [v.ljust(w) for v, w in zip(values[:-1], widths[:-1], strict=True)]
        if not wrap:
            return "  ".join([*cells, shorten(values[-1], widths[-1])]).rstrip()
        pieces = wrapped(values[-1], widths[-1])
        indent = " " * fixed
        return "\n".join(["  ".join([*cells, pieces[0]]).rstrip(), *(indent + p for p in pieces[1:])])

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in body)])


def _blocks(body: Sequence[Sequence[str]], width: int) -> str:
    """Each row as a block: its first cells joined on (wrapped) lines, its last cell indented below."""
    out: list[str] = []
    for row in body:
        out += [""] if out else []  # a blank line between rows: a wrapped head never reads as a new row
        out += wrapped(" · ".join(v for v in row[:-1] if v), width)
        out += wrapped(row[-1], width, indent="  ")
    return "\n".join(out)


def reasons_text_rows(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """(severity, source, reason) per reason, for a terminal table."""
    return [
        (str(r.get("severity")), source_heading(str(r.get("source") or "?")), _reason_line(r)) for r in rows
    ]


def recorded_reasons(warehouse: Any, build: str, run_id: str | None = None) -> list[dict[str, Any]]:
    """The structured reasons of a build's decision (the one `run_id` wrote, else the current one),
    most severe first, from `release_decision_reasons`."""
    if run_id is None:
        sql, params = "SELECT * FROM release_decision_reasons WHERE build = ? ORDER BY rank", [build]
    else:
        sql = "SELECT * FROM release_decision_reasons_history WHERE build = ? AND run_id = ? ORDER BY rank"
        params = [build, run_id]
    frame = warehouse.query(sql, params)
    return [
        {k: (None if v != v else v) for k, v in row.items()}  # NaN (a missing advice) → None
        for row in frame.to_dict("records")
    ]


COUNTED_SEVERITIES = ("block", "investigate", "none")


def reason_counts(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many reasons of each deciding severity (block, investigate, none), zeros included."""
    severities = [str(r.get("severity")) for r in rows]
    return {s: severities.count(s) for s in COUNTED_SEVERITIES}


def check_description(
    subject: str, outcome: str, rows: Sequence[Mapping[str, Any]], limit: int = 1000
) -> str:
    """One check's description: `subject: outcome — N block: source: reason; …; M investigate: …`.

    Every reason of the most severe severity present is named (block first, then investigate, then
    none), each with its source; the other severities are counted. Cut at `limit` characters with a
    count of what was left out, never silently. `outcome` is said once (no "block (block)")."""
    counts = reason_counts(rows)
    worst = next((s for s in COUNTED_SEVERITIES if counts[s]), None)
    if worst is None:
        return f"{subject}: {outcome} — nothing to block or investigate"
    named = [
        f"{source_heading(str(r.get('source') or '?'))}: {_reason_line(r)}"
        for r in rows
        if r.get("severity") == worst
    ]
    others = [f"{n} {s}" for s, n in counts.items() if n and s != worst]
    head = f"{subject}: {outcome} — {counts[worst]} {worst}: "
    tail = f" (also {', '.join(others)})" if others else ""
    body = ""
    for index, text in enumerate(named):
        rest = len(named) - index - 1
        more = f"; … {rest} more" if rest else ""
        piece = ("; " if body else "") + " ".join(text.split())
        if len(head) + len(body) + len(piece) + len(more) + len(tail) > limit:
            body += f"; … {len(named) - index} more" if body else f"… {len(named)} not shown"
            break
        body += piece
    return (head + body + tail)[:limit]


def board_markdown(
    boards: Sequence[Mapping[str, Any]], *, partition_link: Callable[[str], str | None] = lambda _b: None
) -> str:
    """The release board: one row per registered build (registration order) with its decision,
    baseline, reason counts, its suites' pass@k / pass^k and a link to its partition. `boards` rows:
    build, decision (None when none is recorded), baseline, block, investigate, none, reliability."""
    words = {"allow": "allow", "block": "**BLOCK**", "investigate": "*investigate*", "none": "no decision"}
    marks = {d: f"![{d}][{d}] {w}" for d, w in words.items()}  # each image defined once, below the table
    rows = []
    for b in boards:
        link = partition_link(str(b["build"]))
        name = f"[{b['build']}]({link})" if link else str(b["build"])
        decision = marks.get(str(b["decision"]), str(b["decision"])) if b["decision"] else "not decided yet"
        rows.append(
            (
                name,
                decision,
                b["baseline"] or "none",
                b["block"],
                b["investigate"],
                b["none"],
                b.get("reliability") or "-",
            )
        )
    shipping = [str(b["build"]) for b in boards if b["decision"] == "allow"]
    head = f"## Release board: {len(shipping)} of {len(boards)} builds may ship\n\n"
    if not boards:
        return head + "No build is registered.\n"
    table = markdown_table(
        ("build", "decision", "baseline", "block", "investigate", "none", "pass@k / pass^k per suite"), rows
    )
    shown = sorted({str(b["decision"]) for b in boards if b["decision"] in DECISION_COLOURS})
    images = "".join(f"[{d}]: {DECISION_COLOURS[d][1]}\n" for d in shown)
    return head + table.rstrip("\n") + "\n" + (f"\n{images}" if images else "")
