-- The current rows, one per key (newest first), for datasets whose rows are replaced by key.
SELECT * FROM ($current)
QUALIFY row_number() OVER (PARTITION BY $key ORDER BY written_at DESC, run_id DESC) = 1
