"""Text output a person reads whole: `release-status`'s reasons wrap, never cut."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from eval_assets.present import text_table

WORD = st.text(alphabet=st.characters(codec="ascii", categories=["L", "N", "P"]), min_size=1, max_size=30)
ROW = st.tuples(
    st.sampled_from(["block", "investigate", "none"]), WORD, st.lists(WORD, min_size=1, max_size=60)
)


@settings(deadline=None)
@given(st.lists(ROW, min_size=1, max_size=5), st.integers(min_value=20, max_value=200))
def test_a_wrapped_table_keeps_every_word_of_every_cell_in_order_and_fits_the_width(
    rows: list[tuple[str, str, list[str]]], width: int
) -> None:
    table = text_table(
        ("severity", "source", "reason"), [(s, src, " ".join(ws)) for s, src, ws in rows], width, wrap=True
    )

    lines = table.splitlines()
    # a line is longer than the width only when it holds one word that is
    assert all(len(line) <= width or len(line.split()) == 1 for line in lines), table
    assert "…" not in table
    words = table.split()
    expected = [w for s, src, ws in rows for w in (s, src, *ws)]
    # every word of every cell, whole and in order (the table's header and rule words aside)
    found = iter(words)
    assert all(any(w == seen for seen in found) for w in expected), table


# ids end in a digit, so no prose word (letters only) contains one
ID = st.from_regex(r"[a-z0-9][a-z0-9._-]{4,69}[0-9]", fullmatch=True)
PROSE = st.lists(st.from_regex(r"[A-Za-z(),:]{1,12}", fullmatch=True), min_size=1, max_size=40)


@settings(deadline=None, max_examples=150)
@given(
    width=st.one_of(st.sampled_from([40, 60]), st.integers(min_value=20, max_value=200)),
    build=ID,
    baseline=ID,
    scenario=ID,
    reasons=st.lists(
        st.tuples(st.sampled_from(["block", "investigate", "none"]), PROSE), min_size=1, max_size=4
    ),
)
def test_release_status_text_in_a_narrow_terminal_keeps_ids_whole_and_every_reason_word(
    width: int, build: str, baseline: str, scenario: str, reasons: list[tuple[str, list[str]]]
) -> None:
    """`release-status` text at COLUMNS=width (40, 60 and any from 20 to 200), with build and scenario
    ids up to 71 characters: every word of every reason is printed, no id is split across lines, and
    no line is longer than the width unless it holds a single word that is."""
    import contextlib
    import io
    import os
    from unittest import mock

    ids = (build, baseline, scenario)
    assume(not any(a in b for i, a in enumerate(ids) for j, b in enumerate(ids) if i != j))
    assume(not any(a in "helpfulness-v1" for a in ids))

    from eval_assets.cli.status_commands import _print
    from eval_assets.evidence import CheckedDecision

    rows = [
        {
            "severity": severity,
            "source": f"judge helpfulness-v1, {build} vs {baseline}",
            "message": " ".join([*words, scenario]),
            "advice": None,
        }
        for severity, words in reasons
    ]
    checked = CheckedDecision(row={"decision": reasons[0][0], "baseline": baseline}, reasons=rows, stale=[])
    out = io.StringIO()
    with mock.patch.dict(os.environ, {"COLUMNS": str(width)}), contextlib.redirect_stdout(out):
        _print(argparse.Namespace(format="text"), build, checked)
    text = out.getvalue()
    lines = text.splitlines()
    assert all(len(line) <= width or len(line.split()) == 1 for line in lines), text
    assert "…" not in text
    tokens = text.split()
    for _severity, words in reasons:
        assert all(any(w in t for t in tokens) for w in words), (words, text)
    # each id whole on a line as often as it is printed: the title and every reason's source name the
    # build and the baseline, every reason names its scenario (an id split over two lines is missed)
    for identifier, times in ((build, 1 + len(rows)), (baseline, 1 + len(rows)), (scenario, len(rows))):
        assert sum(line.count(identifier) for line in lines) == times, (identifier, text)


def test_release_status_text_shows_a_long_reason_whole(capsys: pytest.CaptureFixture[str]) -> None:
    """The reasons table of `release-status` (and of `run`) wraps: the last words of a 600-character
    reason are on the terminal, not cut to `…`."""
    from eval_assets.cli.status_commands import _print
    from eval_assets.evidence import CheckedDecision

    reason = " ".join(f"word{i}" for i in range(100))
    checked = CheckedDecision(
        row={"decision": "block", "baseline": "b0"},
        reasons=[{"severity": "block", "source": "release", "message": reason, "advice": "do the thing"}],
        stale=[],
    )
    _print(argparse.Namespace(format="text"), "b1", checked)
    out = capsys.readouterr().out
    assert "…" not in out and "word99 — do the thing" in " ".join(out.split())
    assert all(len(line) <= 200 for line in out.splitlines())
