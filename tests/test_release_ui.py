"""What the UI and the terminal show of decisions: check descriptions, the release board, partition
links, the report plot's range and the subject run's progress. Pure functions, no Dagster run."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from eval_assets.capability.progress import Progress, ProgressMeter
from eval_assets.defs.links import partition_url, report_url
from eval_assets.present import DECISION_COLOURS, board_markdown, check_description, reason_counts
from eval_assets.stats import SCORE_RANGE, clipped_band

SEVERITIES = ("block", "investigate", "none", "info")
reason = st.fixed_dictionaries(
    {
        "severity": st.sampled_from(SEVERITIES),
        "source": st.sampled_from(["judge helpfulness-v1, cand vs base", "deterministic suite", "policy"]),
        "message": st.text(
            st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=60
        ),
        "advice": st.one_of(st.none(), st.text(min_size=1, max_size=20)),
    }
)


@given(st.lists(reason, max_size=12), st.sampled_from(["block", "investigate", "no decision", "allow"]))
def test_check_description_names_every_reason_of_the_worst_severity_or_counts_what_it_cut(
    rows: list[dict[str, object]], outcome: str
) -> None:
    text = check_description("build-x", outcome, rows)
    assert len(text) <= 1000
    assert text.startswith(f"build-x: {outcome} — ")
    assert f"{outcome} ({outcome})" not in text
    counts = reason_counts(rows)
    worst = next((s for s in ("block", "investigate", "none") if counts[s]), None)
    if worst is None:
        assert text.endswith("nothing to block or investigate")
        return
    assert f"— {counts[worst]} {worst}: " in text
    named = [r for r in rows if r["severity"] == worst]
    shown = sum(1 for r in named if " ".join(str(r["message"]).split()) in text)
    # every reason of the worst severity is named, or the description says how many it left out
    assert shown >= len(named) or "more" in text or "not shown" in text


def test_check_description_of_the_candidate_names_all_three_block_reasons() -> None:
    rows = [
        {"severity": "block", "source": "judge helpfulness-v1, c vs b", "message": f"scenario s{i} dropped"}
        for i in range(3)
    ] + [{"severity": "investigate", "source": "deterministic suite", "message": "slow"}]
    text = check_description("c", "block", rows)
    assert all(f"scenario s{i} dropped" in text for i in range(3))
    assert "3 block" in text and "(also 1 investigate)" in text


def test_the_board_lists_every_build_with_its_decision_counts_and_a_link_to_its_partition() -> None:
    boards = [
        {"build": "a", "decision": "none", "baseline": None, "block": 0, "investigate": 0, "none": 1},
        {"build": "b", "decision": "allow", "baseline": "a", "block": 0, "investigate": 0, "none": 0},
        {"build": "c", "decision": "block", "baseline": "a", "block": 3, "investigate": 0, "none": 0},
        {"build": "d", "decision": None, "baseline": None, "block": 0, "investigate": 0, "none": 0},
    ]
    text = board_markdown(boards, partition_link=lambda b: partition_url("release_decision", b))
    assert "1 of 4 builds may ship" in text
    rows = [line for line in text.splitlines() if line.startswith("| [")]
    assert len(rows) == 4
    assert (
        "[c](/assets/release_decision?view=partitions&partition=c) | ![block][block] **BLOCK** | a | 3 | 0 | 0 |"
        in text
    )
    assert "| ![allow][allow] allow | a |" in rows[1] and "![none][none] no decision" in rows[0]
    assert "| not decided yet |" in rows[3] and "![" not in rows[3]
    # each mark's image defined once, after the table (a blank line ends the table)
    defined = [line for line in text.splitlines() if line.startswith("[") and "]: data:" in line]
    assert defined == [f"[{d}]: {DECISION_COLOURS[d][1]}" for d in ("allow", "block", "none")]
    assert "|\n\n[allow]: " in text


def test_each_decision_has_its_own_colour_on_the_board_and_none_is_never_the_red_of_block() -> None:
    """The board's mark per decision: an SVG image (the UI's markdown draws data: images) whose fill
    is the decision's colour; allow green, investigate amber, block red, none a hollow grey ring."""
    import base64
    import colorsys

    def hue_and_fill(uri: str) -> tuple[float, str]:
        svg = base64.b64decode(uri.removeprefix("data:image/svg+xml;base64,")).decode()
        fill = svg.split('fill="')[1].split('"')[0]
        stroke = svg.split('stroke="')[1].split('"')[0]
        r, g, b = (int(stroke[i : i + 2], 16) / 255 for i in (1, 3, 5))
        return colorsys.rgb_to_hls(r, g, b)[0] * 360, fill

    seen = {d: hue_and_fill(uri) for d, (_, uri) in DECISION_COLOURS.items()}
    assert set(seen) == {"allow", "investigate", "block", "none"}
    assert 90 <= seen["allow"][0] <= 150  # green
    assert 35 <= seen["investigate"][0] <= 55  # amber, between red and green
    assert seen["block"][0] <= 10 or seen["block"][0] >= 350  # red
    assert seen["none"][1] == "#ffffff"  # hollow: neither a finding's colour nor "missing" filled grey
    assert len({colour for colour, _ in DECISION_COLOURS.values()}) == 4


@given(
    st.from_regex(r"[a-z0-9][a-z0-9.-]{0,30}", fullmatch=True), st.sampled_from(["helpfulness-v1", "s-v2"])
)
def test_links_land_on_the_exact_partition_including_the_judge_version(build: str, version: str) -> None:
    url = urlsplit(report_url(build, version))
    query = parse_qs(url.query)
    assert url.path == "/assets/capability_report"
    assert query == {"view": ["partitions"], "partition": [f"{build}|{version}"]}
    assert parse_qs(urlsplit(partition_url("release_decision", build)).query)["partition"] == [build]


@given(
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30),
    st.lists(st.floats(0.0, 2.0), min_size=1, max_size=30),
)
def test_report_bands_never_leave_the_score_range(centres: list[float], halves: list[float]) -> None:
    n = min(len(centres), len(halves))
    low, high = clipped_band(np.array(centres[:n]), np.array(halves[:n]), *SCORE_RANGE)
    assert (low >= SCORE_RANGE[0]).all() and (high <= SCORE_RANGE[1]).all() and (low <= high).all()


def test_progress_is_reported_at_most_every_interval_and_always_at_the_end() -> None:
    now = [0.0]
    seen: list[Progress] = []
    meter = ProgressMeter("scenario_runs b", 1000, seen.append, every_s=5.0, clock=lambda: now[0])
    for _block in range(10):
        now[0] += 2.0  # a block of 100 every 2 s: reports at 2 s, 8 s, 14 s and the end (20 s)
        meter.add([("ok", 0.001)] * 99 + [("error", 0.0)])
    assert [p.done for p in seen] == [100, 400, 700, 1000]
    last = seen[-1]
    assert last.errors == 10 and round(last.spend_usd, 6) == 0.99 and last.elapsed_s == 20.0
    assert last.rate == 50.0 and last.left_s == 0.0
    assert seen[0].line() == (
        "scenario_runs b: 100/1000 attempts (10%) · 1 errors · $0.099 · 50.0/s · 18s left"
    )


def test_every_value_the_html_report_shows_is_redacted_then_escaped() -> None:
    from eval_assets.redact import register_secret
    from eval_assets.report_html import shown

    planted = "-".join(["sk", "proj", "Zq8x" * 8])  # built at run time: no credential in the source
    register_secret(planted)
    text = shown(f'output quoting {planted} and <script>alert("x")</script>')
    assert planted not in text and "<script>" not in text and "&lt;script&gt;" in text
    assert shown(None) == ""


def test_progress_off_a_terminal_is_one_plain_line_per_report_never_over_200_characters() -> None:
    import io
    import logging

    from eval_assets.cli.run_commands import ProgressPrinter

    stream = io.StringIO()
    printer = ProgressPrinter(stream)
    progress = Progress("scenario_runs " + "b" * 300, 40, 200, 1, 0.5, 4.0)
    record = logging.LogRecord("evaltrack.progress", logging.INFO, __file__, 1, progress.line(), None, None)
    record.progress = progress
    printer.emit(record)
    printer.emit(record)
    printer.finish()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and all(len(line) <= 200 for line in lines)
    assert "\r" not in stream.getvalue() and lines[0].endswith("…")


def test_progress_goes_to_stdout_as_it_is_when_the_printer_is_made_not_when_the_module_was_imported() -> None:
    """A command run twice in one process (tests, a notebook) with its stdout redirected in between
    prints its progress to the stdout of the second run, not to a stream the first one closed."""
    import contextlib
    import io
    import logging

    from eval_assets.cli import run_commands

    progress = Progress("scenario_runs b", 40, 200, 1, 0.5, 4.0)
    record = logging.LogRecord("evaltrack.progress", logging.INFO, __file__, 1, progress.line(), None, None)
    record.progress = progress
    for _ in range(2):
        with contextlib.redirect_stdout(io.StringIO()) as redirected:
            run_commands.ProgressPrinter().emit(record)
        assert redirected.getvalue() == f"  {progress.line()}\n"
