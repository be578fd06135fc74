"""The warehouse: Parquet partitions written by the one partition writer, and the DuckDB views over them.

- `_datasets`: the table schemas (one place) and the row check every write passes (a missing or
  extra column is an error naming the table and the column);
- `_writer`: the atomic file write and the partition manifest;
- `_views` and `views/*.sql`: the catalog's views, as SQL files shipped with the package;
- `_warehouse`: `Warehouse` (writing partitions, the catalog, reading, damage and quarantine).
"""

from eval_assets.warehouse._datasets import DATASETS, Dataset, WarehouseError, check_rows
from eval_assets.warehouse._views import TOMBSTONE_PREFIX, derived_views, typed_columns
from eval_assets.warehouse._warehouse import Damage, ManifestError, ManifestHealthy, Warehouse
from eval_assets.warehouse._writer import Entry, literal_path

__all__ = [
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
    "literal_path",
    "typed_columns",
]
