"""The Dagster UI as a release engineer meets it after `evaltrack demo`, in a real browser.

SLOW (one demo, a few minutes, made once per session and shared by the tests and xdist workers).
`evaltrack demo` runs once into a temporary EVAL_HOME, then a fourth build whose decision is
investigate (tests/e2e/builds/investigate.yaml); the demo's output and the warehouse doc's example
queries are checked on it. One test starts `evaltrack ui` on a free 127.0.0.1 port (its own session;
the test stops it, and kills whatever it left). Then:

- through GraphQL: opening the UI on that home launches no run within 2 minutes (the runs list is
  polled; the test ends early on the first run it sees);
- in headless Chromium (Debian's `chromium`, driven by Playwright): the candidate's release-decision
  check shows as failed, the rebuild's as passed, and the capability report's plot image is loaded
  with a non-zero natural width; per decision (allow, block, investigate, none) the colour of
  release_approval's partition dot, of its `decision` check's dot and of that check's status tag on
  the partition's panel (computed style), the decision and its reasons on that panel, and the board's
  coloured mark; a board link, like a reason's, lands on the exact partition; the candidate's
  HTML report (`evaltrack report`) flags its three scenarios and shows a blocked scenario's
  transcript within two clicks. Screenshots go to the test's temporary directory (and to
  $EVAL_UI_SHOTS when set).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from e2e.graphql import DagsterGraphQL
from e2e.processes import free_port, running_ui, wait_for

from eval_assets.home import PROJECT_ROOT

pytestmark = pytest.mark.e2e  # the slow lane: bash scripts/test_e2e

CHROMIUM = Path("/usr/bin/chromium")
BASELINE, REBUILD, CANDIDATE = "agent-2026-11-28-base", "agent-2026-11-29-rebuild", "agent-2026-11-30-cand"
INVESTIGATED = "agent-2026-12-01-inv"  # tests/e2e/builds/investigate.yaml, run after the demo
INVESTIGATE_MANIFEST = Path(__file__).resolve().parent / "e2e" / "builds" / "investigate.yaml"
NO_RUN_WINDOW_S = 120.0
LOAD_BOUND_S = 600.0  # a loaded 2-core machine can take minutes to import the code location
DEMO_BOUND_S = 1800  # the demo runs each build's suite: 15+ minutes on this 2-core machine at a load of 25


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home where `evaltrack demo` ran (the shipped project's three example builds), made once per
    test session: pytest-xdist workers share it through a lock in the session's base temp dir."""
    # under xdist each worker's base temp dir is inside the session's own; without it the base temp dir
    # is the session's, and its parent outlives the session (a home made by another version would be
    # reused)
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    home = shared / "e2e-ui-demo" / "home"
    with (shared / "e2e-ui-demo.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home.parent / "demo.done").exists():
            shutil.rmtree(home.parent, ignore_errors=True)
            home.parent.mkdir(parents=True)
            evaltrack = str(Path(sys.executable).with_name("evaltrack"))

            def ran(*args: str) -> subprocess.CompletedProcess[str]:
                done = subprocess.run(
                    [evaltrack, "--home", str(home), *args],
                    env=_env(),
                    capture_output=True,
                    text=True,
                    timeout=DEMO_BOUND_S,
                    stdin=subprocess.DEVNULL,
                )
                assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
                return done

            proc = ran("demo")
            (home.parent / "demo.out").write_text(proc.stdout)
            (home.parent / "demo.err").write_text(proc.stderr)
            # a fourth build whose decision is investigate: every decision is then on the UI's pages
            ran("build", "add", str(INVESTIGATE_MANIFEST))
            more = ran("run", "--build", INVESTIGATED)
            assert "investigate" in more.stdout.splitlines()[-1], more.stdout[-2000:]
            (home.parent / "demo.done").write_text("ok")
    return home


def test_demo_prints_short_lines_and_ends_with_the_three_decisions_in_a_table(demo_home: Path) -> None:
    out = (demo_home.parent / "demo.out").read_text()
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 200
    assert (
        max((len(line) for line in (demo_home.parent / "demo.err").read_text().splitlines()), default=0)
        <= 200
    )
    assert "{'" not in out and "base64" not in out
    # one line per step, with counts; the subject run's progress (not a terminal: plain lines) ends at 110/110
    assert (
        sum(1 for line in lines if line.strip().startswith("scenario_runs ") and "110/110 attempts ·" in line)
        == 3
    )
    for build in (BASELINE, REBUILD, CANDIDATE):
        assert any(
            line.strip().startswith(f"scenario_runs {build}: 110/110 attempts (100%)") for line in lines
        )
    assert (
        sum(1 for line in lines if line.strip().startswith("release_board ")) == 1
    )  # once, after the builds
    steps = [line.split()[:2] for line in lines if line.strip().startswith("release_approval")]
    assert steps == [
        ["release_approval", "not"],
        ["release_approval", "approved:"],
        ["release_approval", "not"],
    ]
    # the last table: a header, a rule, then the three builds with their decisions and HTML reports
    header, rule, *rows = lines[-5:]
    assert header.split()[:3] == ["build", "decision", "reasons"] and set(rule.replace(" ", "")) == {"-"}
    decisions = {row.split()[0]: row.split()[1] for row in rows}
    assert decisions == {BASELINE: "none", REBUILD: "allow", CANDIDATE: "block"}
    assert all(f"reports/{b}/report.html" in row for b, row in zip(decisions, rows, strict=True))
    assert all(f"reports/{b}/helpfulness-v1.png" in out for b in decisions)


def _sql_blocks(markdown: str) -> list[str]:
    blocks, current = [], None
    for line in markdown.splitlines():
        if line.strip() == "```sql":
            current = []
        elif line.strip() == "```" and current is not None:
            blocks.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_every_example_query_in_the_warehouse_doc_runs_on_a_demo_home(demo_home: Path) -> None:
    import duckdb

    queries = _sql_blocks((PROJECT_ROOT / "docs" / "warehouse.md").read_text())
    assert len(queries) >= 8
    con = duckdb.connect(str(demo_home / "warehouse" / "warehouse.duckdb"), read_only=True)
    try:
        results = [con.execute(q).fetchall() for q in queries]
        # the first query naming a build's per-scenario mean score: its worst scenarios
        worst = next(r for q, r in zip(queries, results, strict=True) if "mean_score" in q)
        typed = con.execute(
            "SELECT typeof(criteria) FROM judge_verdicts WHERE criteria IS NOT NULL LIMIT 1"
        ).fetchone()
        reasons = con.execute(
            "SELECT typeof(reasons), typeof(judge_versions) FROM release_decisions WHERE build = ?",
            [CANDIDATE],
        ).fetchone()
        views = {
            r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
        }
    finally:
        con.close()
    # a build's worst scenarios: five per judge version, the candidate's broken ones among them
    assert len(worst) == 10 and {"support.refund-policy", "coding.fix-off-by-one"} <= {r[1] for r in worst}
    # every query returns rows on the demo home, except those over human scores (the demo has none)
    needs_people = ["judge_agreement" in q for q in queries]
    assert all(r for r, people in zip(results, needs_people, strict=True) if not people), [
        len(r) for r in results
    ]
    assert sum(needs_people) >= 2 and not any(
        r for r, people in zip(results, needs_people, strict=True) if people
    )
    assert (
        typed == ("JSON",)
        and reasons is not None
        and reasons[0].startswith("STRUCT")
        and reasons[1] == "VARCHAR[]"
    )
    doc = (PROJECT_ROOT / "docs" / "warehouse.md").read_text()
    assert all(f"`{view}`" in doc for view in views if not view.endswith("_history")), views


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("EVAL_HOME", "DAGSTER_HOME", "EVAL_PROJECT_ROOT")}
    env["PYTHONUNBUFFERED"] = "1"
    env["LITELLM_OFFLINE_MODE"] = "true"
    return env


def _shot(page: Any, tmp: Path, name: str) -> Path:
    path = tmp / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    extra = os.environ.get("EVAL_UI_SHOTS")
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(extra) / path.name)
    return path


def _show_markdown(page: Any, entry: str) -> Any:
    """Open the markdown metadata entry `entry` of the selected event; returns the dialog."""
    page.locator("tr", has_text=entry).get_by_text("[Show Markdown]").first.click()
    dialog = page.get_by_role("dialog").first
    dialog.wait_for()
    return dialog


def _assert_loaded(page: Any, image: Any) -> None:
    """Wait for the image `image` (a locator) to appear and finish loading; fails if it has no pixels."""
    image.wait_for()
    width = page.wait_for_function("(img) => img.complete && img.naturalWidth", arg=image.element_handle())
    assert int(width.json_value()) > 0


# what a release engineer sees per decision (docs/design.md, "The release verdict at a glance in the UI"):
# release_approval's partition dot (Dagster draws an asset partition green, red or grey, never yellow),
# its `decision` check's partition dot and the intent of that check's status tag on the partition's
# panel (yellow for WARN), and the board's mark (its image's colour)
DECISIONS = {BASELINE: "none", REBUILD: "allow", CANDIDATE: "block", INVESTIGATED: "investigate"}
EXPECTED_DOT = {
    BASELINE: "accent-gray",
    REBUILD: "accent-green",
    CANDIDATE: "accent-red",
    INVESTIGATED: "accent-red",
}
EXPECTED_CHECK_DOT = {b: "accent-green" if d == "allow" else "accent-red" for b, d in DECISIONS.items()}
EXPECTED_TAG = {BASELINE: "yellow", REBUILD: "green", CANDIDATE: "red", INVESTIGATED: "yellow"}
COLOUR_OF = """(el, names) => {
    const probe = (name) => { const e = document.createElement('div');
        e.style.background = `var(--color-${name})`; document.body.appendChild(e);
        const c = getComputedStyle(e).backgroundColor; e.remove(); return c; };
    const seen = getComputedStyle(el).backgroundColor;
    for (const name of names) { if (probe(name) === seen) return name; }
    return seen;
}"""
DOT_NAMES = ["accent-green", "accent-red", "accent-yellow", "accent-gray", "accent-blue"]
TAG_NAMES = ["background-green", "background-red", "background-yellow", "background-gray", "background-blue"]


def _partition_row(page: Any, build: str) -> Any:
    return page.locator(f"div[data-tooltip='{build}']").filter(has=page.locator("span", has_text=build)).last


def partition_colours(page: Any) -> dict[str, str]:
    """Build → the colour name of its status dot in the open Partitions list (computed style)."""
    colours = {}
    for build in DECISIONS:
        row = _partition_row(page, build)
        row.wait_for()
        colours[build] = row.evaluate(
            f"(row, names) => ({COLOUR_OF})(row.nextElementSibling, names)", DOT_NAMES
        )
    return colours


def tag_colour(page: Any, text: str) -> str:
    """The colour name of the status tag reading `text` on the open panel (its computed background)."""
    tag = page.get_by_text(text, exact=True).last
    tag.wait_for()
    name = tag.evaluate(
        f"""(el, names) => {{ let n = el; const probe = {COLOUR_OF};
            while (n && getComputedStyle(n).backgroundColor === 'rgba(0, 0, 0, 0)') n = n.parentElement;
            return n ? probe(n, names) : 'none'; }}""",
        TAG_NAMES,
    )
    return str(name).removeprefix("background-")


def check_colours(page: Any, base: str, tmp: Path) -> None:
    """Each decision's look: release_approval's partition dots (green allow, red block and investigate,
    grey none), its `decision` check's dots and the panel's status tag (yellow for investigate and
    none, red for block, green for allow) with the decision and its reasons in the panel's
    description, the release board's coloured mark per build, and a board link and a reason link that
    land on their exact partitions."""
    page.goto(f"{base}/assets/release_approval?view=partitions")
    page.get_by_text("Partitions Selected").first.wait_for()
    colours = partition_colours(page)
    _shot(page, tmp, "8-approval-partitions")
    assert colours == EXPECTED_DOT, colours
    # the decision check's Partitions tab: one panel per build with its decision and reasons
    page.goto(f"{base}/assets/release_approval?view=checks&checkDetail=decision")
    page.get_by_text("Execution history", exact=True).first.wait_for()
    page.get_by_role("tab", name="Partitions").last.click()
    page.get_by_text("Partitions Selected").first.wait_for()
    colours = partition_colours(page)
    _shot(page, tmp, "8b-decision-check-partitions")
    assert colours == EXPECTED_CHECK_DOT, colours
    tags = {}
    for build, decision in DECISIONS.items():
        _partition_row(page, build).click()
        page.get_by_text("Description", exact=True).first.wait_for()
        head = "no decision" if decision == "none" else decision
        page.get_by_text(f"{build}: {head} — ").first.wait_for()
        body = page.inner_text("body")
        if decision == "block":
            assert "coding.fix-off-by-one" in body and "safety.prompt-injection-in-document" in body, body[
                -2000:
            ]
        if decision == "investigate":
            assert "1 investigate: helpfulness-v1" in body and "top up repeats" in body, body[-2000:]
        if decision == "none":
            assert "no baseline: decides nothing" in body, body[-2000:]
        tags[build] = tag_colour(page, "Passed" if decision == "allow" else "Failed")
        _shot(page, tmp, f"8c-decision-panel-{decision}")
    assert tags == EXPECTED_TAG, tags
    # the release board: every build with its decision and coloured mark, linked to its partition
    page.goto(f"{base}/assets/release_board?view=events")
    page.get_by_text("may_ship", exact=True).first.wait_for()
    dialog = _show_markdown(page, "board")
    board = dialog.locator("table").first
    board.wait_for()
    _shot(page, tmp, "9-release-board")
    rows = {r.split("\t")[0].strip(): r for r in board.locator("tbody tr").all_inner_texts()}
    assert "BLOCK" in rows[CANDIDATE] and "allow" in rows[REBUILD] and "no decision" in rows[BASELINE], rows
    assert "investigate" in rows[INVESTIGATED] and "BLOCK" not in rows[REBUILD], rows
    marks = {}
    for build in DECISIONS:
        image = board.locator("tr", has_text=build).locator("img").first
        _assert_loaded(page, image)
        marks[build] = image.get_attribute("alt")
    assert marks == DECISIONS, marks
    board.get_by_role("link", name=CANDIDATE).click()
    page.wait_for_url(f"**/assets/release_decision?view=partitions&partition={CANDIDATE}")
    page.locator("h3, h2, div", has_text=CANDIDATE).first.wait_for()
    page.get_by_text("[Show Markdown]").first.wait_for()
    _shot(page, tmp, "10-board-link-partition")
    # a reason's link lands on the report partition of that build and judge version
    dialog = _show_markdown(page, "reasons")
    link = dialog.get_by_role("link", name=f"safety-v1 ({CANDIDATE} vs {BASELINE})")
    assert (
        link.get_attribute("href")
        == f"/assets/capability_report?view=partitions&partition={CANDIDATE}%7Csafety-v1"
    )
    link.click()
    page.get_by_text(f"{CANDIDATE}|safety-v1", exact=True).first.wait_for()
    page.get_by_text("judge_version", exact=True).first.wait_for()  # its metadata has loaded
    _shot(page, tmp, "11-reason-link-partition")


def check_report_page(page: Any, report: Path, tmp: Path) -> None:
    """The HTML report opens from the file (no server): its scenario table flags the candidate's three
    scenarios, and a blocked scenario's transcript is two clicks away after filtering to block."""
    page.goto(report.as_uri())
    assert page.locator("#decision").inner_text() == "block"
    statuses = {
        r.get_attribute("data-scenario"): r.get_attribute("data-status")
        for r in page.locator("#scenario-table tr[data-scenario]").all()
    }
    assert (
        statuses["coding.fix-off-by-one"] == "block"
        and statuses["safety.prompt-injection-in-document"] == "block"
    )
    assert statuses["support.refund-policy"] == "investigate"
    page.locator("#scenario-table").scroll_into_view_if_needed()
    _shot(page, tmp, "12-report-scenario-table")
    page.select_option("#f-status", "block")
    shown = page.locator("details.scenario:visible")
    assert shown.count() == 2
    shown.first.locator("summary").first.click()  # click 1: the scenario's attempts
    attempt = shown.first.locator("details.attempt").first
    attempt.locator("summary").click()  # click 2: one attempt's transcript
    for part in ("Input", "Output", "Verdict helpfulness-v1"):
        attempt.get_by_text(part, exact=True).first.wait_for(state="visible")
    assert attempt.locator("pre.rationale").first.is_visible()
    attempt.scroll_into_view_if_needed()
    _shot(page, tmp, "13-report-transcript")


def check_ui(base: str, tmp: Path, demo_report: Path) -> None:
    """What a release engineer sees, asserted on the rendered pages; screenshots into `tmp`."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.set_default_timeout(180_000)
            # 1. Catalog → release_decision → Checks: the latest evaluation names the build it judged
            page.goto(f"{base}/assets")
            page.get_by_text("release_decision", exact=True).first.wait_for()
            _shot(page, tmp, "1-catalog")
            page.goto(f"{base}/assets/release_decision?view=checks")
            page.get_by_text("Latest execution").first.wait_for()
            _shot(page, tmp, "2-release-decision-check")
            # 2. the check's history: one row per build, the candidate failed, the rebuild passed
            page.get_by_text("Execution history", exact=True).first.click()
            candidate = page.locator("tr", has_text=CANDIDATE).first
            candidate.wait_for()
            _shot(page, tmp, "3-check-history")
            assert "Failed" in candidate.inner_text(), candidate.inner_text()
            rebuild = page.locator("tr", has_text=REBUILD).first.inner_text()
            assert "Passed" in rebuild and "Failed" not in rebuild, rebuild
            # 3. the decision's reasons, grouped by severity, with each judge version's plot inline
            page.goto(f"{base}/assets/release_decision?view=events")
            page.get_by_text(CANDIDATE).first.click()
            dialog = _show_markdown(page, "reasons")
            dialog.get_by_text("Block", exact=True).first.wait_for()
            _assert_loaded(page, dialog.locator("img").first)
            _shot(page, tmp, "4-decision-reasons")
            # 4. the report partition with its plot
            page.goto(f"{base}/assets/capability_report?view=events")
            page.get_by_text(f"{CANDIDATE}|helpfulness-v1").first.click()
            dialog = _show_markdown(page, "report")
            _assert_loaded(page, dialog.locator("img[alt='capability report']").first)
            _shot(page, tmp, "5-report-plot")
            # 5. the gate table
            page.goto(f"{base}/assets/deterministic_suite?view=events")
            page.get_by_text(CANDIDATE).first.click()
            dialog = _show_markdown(page, "gates_md")
            dialog.locator("table").first.wait_for()
            assert dialog.locator("th").all_inner_texts()[:5] == [
                "gate",
                "kind",
                "milestone",
                "status",
                "detail",
            ]
            _shot(page, tmp, "6-gate-table")
            # 6. the score trend of a judge version over the three builds, with its plot
            page.goto(f"{base}/assets/score_trend?view=events")
            page.get_by_text("helpfulness-v1").first.click()
            dialog = _show_markdown(page, "trend")
            for build in (BASELINE, REBUILD, CANDIDATE):
                dialog.get_by_text(build).first.wait_for()
            _assert_loaded(page, dialog.locator("img[alt='score trend']").first)
            _shot(page, tmp, "7-score-trend")
            check_colours(page, base, tmp)
            check_report_page(page, demo_report, tmp)
        finally:
            browser.close()


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (scripts/setup installs it)")
def test_the_ui_on_a_demo_home_launches_nothing_and_shows_the_blocked_candidate_in_red(
    demo_home: Path, tmp_path: Path
) -> None:
    """SLOW. One `evaltrack ui` (one daemon per home), stopped by the test: (1) through GraphQL, no run
    is launched within 2 minutes of starting it (the runs list is polled; the first new run fails the
    test at once); (2) in Chromium, the candidate's release check failed, the rebuild's passed, and
    the report's plot image loaded."""
    port = free_port()
    with running_ui(demo_home, PROJECT_ROOT, port, tmp_path / "ui.log", _env()) as server:
        started = time.monotonic()
        gql = DagsterGraphQL(server.url, timeout_s=120)
        location = wait_for(lambda: gql.reachable() and gql.loaded_location(), LOAD_BOUND_S, 1.0)
        assert location, f"the code location did not load:\n{server.log_tail()}"
        assert location[0] == "eval_track"
        demo_runs = gql.runs()
        assert demo_runs and not any(r["tags"].get("dagster/sensor_name") for r in demo_runs)
        before = {r["runId"] for r in demo_runs}

        def launched() -> list[dict[str, Any]] | None:
            server.track_sessions()
            return [r for r in gql.runs() if r["runId"] not in before] or None

        new_runs = wait_for(launched, max(NO_RUN_WINDOW_S - (time.monotonic() - started), 0.0), 2.0)
        assert new_runs is None, [(r["assets"], r["tags"].get("dagster/sensor_name")) for r in new_runs or []]

        # runs launched by `evaltrack demo` belong to the code location: its job pages list them
        origins = {
            (o["repositoryLocationName"], o["repositoryName"]) if (o := r["repositoryOrigin"]) else None
            for r in demo_runs
        }
        assert origins == {("eval_track", "__repository__")}, origins
        report = tmp_path / "candidate.html"
        proc = subprocess.run(
            [
                str(Path(sys.executable).with_name("evaltrack")),
                "--home",
                str(demo_home),
                "report",
                CANDIDATE,
                "--html",
                str(report),
            ],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0 and report.is_file(), proc.stderr[-2000:]
        check_ui(server.url, tmp_path, report)
        assert server.terminate(60) == 0, server.log_tail()
