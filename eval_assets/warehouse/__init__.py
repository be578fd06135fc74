"""The warehouse: Parquet partitions written by the one partition writer, and the DuckDB views over them.

- `_datasets`: the table schemas (one place) and the row check every write passes (a missing or
  extra column is an error naming the table and the column);
- `_writer`: the atomic file write and the partition manifest;
- `_views` and `views/*.sql`: the catalog's views, as SQL files shipped with the package;
- `_warehouse`: `Warehouse` (writing partitions, the catalog, reading, damage and quarantine), on the
  home's directory;
- `_object`: `ObjectWarehouse`, the same on an S3-compatible bucket with its catalog in PostgreSQL;
  `open_warehouse` picks one from the project's `warehouse` setting (docs/deploy.md).
"""

from pathlib import Path
from typing import TYPE_CHECKING

from eval_assets.warehouse._datasets import DATASETS, Dataset, WarehouseError, check_rows, run_varying
from eval_assets.warehouse._views import TOMBSTONE_PREFIX, derived_views, typed_columns
from eval_assets.warehouse._warehouse import Damage, ManifestError, ManifestHealthy, Warehouse
from eval_assets.warehouse._writer import Entry, literal_path

if TYPE_CHECKING:
    from eval_assets.config import WarehouseSettings
    from eval_assets.warehouse._object import Bucket, ObjectWarehouse


def __getattr__(name: str) -> object:
    """`ObjectWarehouse` and `Bucket`, imported on first use (pyarrow and the catalog only where a
    bucket is used)."""
    if name in ("ObjectWarehouse", "Bucket"):
        from eval_assets.warehouse._object import Bucket, ObjectWarehouse

        return {"Bucket": Bucket, "ObjectWarehouse": ObjectWarehouse}[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_warehouse(root: Path, settings: "WarehouseSettings | None" = None) -> Warehouse:
    """The warehouse the project's `warehouse` setting names: the directory `root` (no url), else the
    bucket and its PostgreSQL catalog, staging its files under `root`."""
    if settings is None or settings.url is None or settings.catalog is None:
        return Warehouse(root)
    from eval_assets.warehouse._object import ObjectWarehouse  # pyarrow only where a bucket is used

    return ObjectWarehouse(root, settings.url, settings.catalog)


__all__ = [
    "Bucket",
    "ObjectWarehouse",
    "DATASETS",
    "TOMBSTONE_PREFIX",
    "Damage",
    "Dataset",
    "Entry",
    "ManifestError",
    "ManifestHealthy",
    "Warehouse",
    "WarehouseError",
    "check_rows",
    "derived_views",
    "open_warehouse",
    "run_varying",
    "literal_path",
    "typed_columns",
]
