"""No comment or docstring under eval_assets/ quotes a timing figure: a measured cost goes stale the day the
code around it changes, and the figures live in benchmarks/results/. Comments say why; the few contract values
that read like timings (an interval the code keeps, a library's documented behaviour) are allowed by name."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a figure with a time unit: "0.5 s", "~4 s", "2–3 s", "80 ms", "1,000 ms"
TIMING = re.compile(r"(?<![\w.])~?\d+(?:[.,]\d+)?(?:\s?[–-]\s?\d+(?:\.\d+)?)? ?(?:ms|s)\b")
# (file, the exact words): values that state what the code does or what a library does, not a cost
ALLOWED = {
    ("eval_assets/capability/materialize.py", "at most every 5 s"),  # the progress line's interval (docs)
    ("eval_assets/localmodel/supervise.py", "every 0.2 s"),  # the supervisor's poll interval
    ("eval_assets/spend/_backends.py", "1, 2, 5, 10 ... 100 ms"),  # SQLite's busy handler, documented
    ("eval_assets/spend/_backends.py", "first\n    10 ms"),  # WriteTurn.pause's short-wait bound
    ("eval_assets/spend/_backends.py", "at most 1 ms apart"),  # WriteTurn.pause's longest poll
    ("eval_assets/spend/_backends.py", "doubling up to 1 ms"),  # the same bound, in pause's docstring
    ("eval_assets/stats/_agreement.py", "(2 s^2)"),  # a variance in a formula, not a time
}


def comments_and_docstrings(source: str) -> list[tuple[int, str]]:
    """Every comment (by tokenize) and every module, class and function docstring (by ast), with its line."""
    found = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                found.append((node.body[0].lineno, doc))
    # a constant's docstring: the string statement right after an assignment
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for before, after in zip(body, body[1:], strict=False):
            if (
                isinstance(before, ast.Assign | ast.AnnAssign)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                found.append((after.lineno, after.value.value))
    return found


def timing_figures(path: Path, relative: str) -> list[str]:
    out = []
    for line, text in sorted(comments_and_docstrings(path.read_text(encoding="utf-8"))):
        for allowed_file, words in ALLOWED:
            if allowed_file == relative:
                text = text.replace(words, "")
        out += [f"{relative}:{line}: {m.group(0)!r}" for m in TIMING.finditer(text)]
    return out


def test_no_comment_or_docstring_under_eval_assets_quotes_a_timing() -> None:
    found = []
    for path in sorted((ROOT / "eval_assets").rglob("*.py")):
        found += timing_figures(path, path.relative_to(ROOT).as_posix())
    assert found == [], "say why without the figure (measurements live in benchmarks/results/):\n" + "\n".join(found)


def test_the_check_finds_a_timing_in_a_comment_a_docstring_and_a_constants_docstring(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        '"""Module: importing this costs ~4 s of CPU."""\n'
        "X = 1  # about 80 ms per run\n"
        'LIMIT = 0.04\n"""Set in 2–3 s."""\n'
        "def f():\n"
        '    """Took 1,000 ms before."""\n'
        "    return 1  # 5 seconds is fine: not a figure the pattern names; 3 scenarios neither\n",
        encoding="utf-8",
    )
    found = timing_figures(planted, "planted.py")
    assert [f.split(": ", 1)[1] for f in found] == ["'~4 s'", "'80 ms'", "'2–3 s'", "'1,000 ms'"]


def test_every_allowed_contract_value_is_still_there() -> None:
    for relative, words in ALLOWED:
        assert words in (ROOT / relative).read_text(encoding="utf-8"), f"{relative}: {words!r} is gone: drop it"
