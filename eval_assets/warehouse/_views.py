"""The catalog's views, from the SQL files under `views/` (shipped as package data).

- `views/dataset/*.sql`: the two views of every dataset, `<name>_history` (every file) and `<name>`
  (the newest file per partition; one row per key where the dataset dedupes; every file where it is
  append-only), filled in with the dataset's glob, partition keys and typed columns;
- `views/typed/<dataset>.<column>.sql`: typed columns for analysts (the files keep JSON text and
  joined strings; the views give DuckDB JSON and lists);
- `views/derived/NN-<name>.sql`: analyst-facing joins and sums over those, created in NN order.

`--` comment lines are documentation and are left out of the statements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from string import Template

from eval_assets.warehouse._datasets import Dataset
from eval_assets.warehouse._writer import literal_path

VIEWS = Path(__file__).parent / "views"
TOMBSTONE_PREFIX = "quarantined:"


def _sql(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--")).strip()


def _template(name: str) -> Template:
    return Template(_sql(VIEWS / "dataset" / f"{name}.sql"))


def typed_columns(dataset: str) -> dict[str, str]:
    """Column -> SQL expression replacing it in the dataset's views (none for most datasets)."""
    return {p.name.split(".")[1]: _sql(p) for p in sorted((VIEWS / "typed").glob(f"{dataset}.*.sql"))}


def derived_views() -> list[tuple[str, str]]:
    """(name, SELECT) of every derived view, in creation order."""
    return [(p.stem.split("-", 1)[1], _sql(p)) for p in sorted((VIEWS / "derived").glob("*.sql"))]


def _q(path: Path) -> str:
    return str(path).replace("'", "''")


def _glob(directory: Path) -> str:
    """Every Parquet file under `directory`, as a quoted-safe DuckDB glob: the directory's own glob
    characters escaped (a home path is never a pattern), then `/**/*.parquet`."""
    return _q(Path(literal_path(directory))) + "/**/*.parquet"


def view_sql(
    data: Path, datasets: Mapping[str, Dataset], files: Callable[[str], str] | None = None
) -> list[str]:
    """CREATE VIEW statements for every dataset over the Parquet files under `data`, then the derived views.

    `files(dataset)` is the `read_parquet` argument naming the dataset's files (a SQL literal: a list of
    catalogued objects); by default the quoted glob of every file under `data/<dataset>`."""
    source = files or (lambda name: "'" + _glob(data / name) + "'")
    live = f"coalesce(run_id, '') NOT LIKE '{TOMBSTONE_PREFIX}%'"
    reasons_files = source("release_decision_reasons")
    raw_t, history_t, current_t, dedupe_t = (_template(n) for n in ("raw", "history", "current", "dedupe"))
    out = []
    for ds in datasets.values():
        typed = typed_columns(ds.name)
        select = "*"
        if typed:
            exprs = ", ".join(
                f"{Template(expr).substitute(reasons_files=reasons_files)} AS {col}"
                for col, expr in typed.items()
            )
            select = f"* REPLACE ({exprs})"
        raw = raw_t.substitute(select=select, files=source(ds.name))
        out.append(f"CREATE OR REPLACE VIEW {ds.name}_history AS {history_t.substitute(raw=raw, live=live)}")
        if ds.append_only:
            out.append(f"CREATE OR REPLACE VIEW {ds.name} AS SELECT * FROM {ds.name}_history")
            continue
        current = current_t.substitute(raw=raw, partition=", ".join(ds.partition_by), live=live)
        if ds.dedupe_by:
            current = dedupe_t.substitute(current=current, key=", ".join(ds.dedupe_by))
        out.append(f"CREATE OR REPLACE VIEW {ds.name} AS {current}")
    out += [f"CREATE OR REPLACE VIEW {name} AS {sql}" for name, sql in derived_views()]
    return out
