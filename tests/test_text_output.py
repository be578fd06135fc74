"""Text output a person reads whole: `release-status`'s reasons wrap, never cut."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_assets.present import text_table

WORD = st.text(alphabet=st.characters(codec="ascii", categories=["L", "N", "P"]), min_size=1, max_size=30)
ROW = st.tuples(
    st.sampled_from(["block", "investigate", "none"]), WORD, st.lists(WORD, min_size=1, max_size=60)
)


@settings(deadline=None)
@given(st.lists(ROW, min_size=1, max_size=5), st.integers(min_value=60, max_value=200))
def test_a_wrapped_table_keeps_every_word_of_the_last_column_in_order_and_fits_the_width(
    rows: list[tuple[str, str, list[str]]], width: int
) -> None:
    table = text_table(
        ("severity", "source", "reason"), [(s, src, " ".join(ws)) for s, src, ws in rows], width, wrap=True
    )

    lines = table.splitlines()
    assert all(len(line) <= width for line in lines), max(len(line) for line in lines)
    assert "…" not in table
    start = lines[0].index("reason")
    text = " ".join(line[start:].strip() for line in lines[2:])
    assert "".join(w for _, _, ws in rows for w in ws) == text.replace(" ", "")


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
