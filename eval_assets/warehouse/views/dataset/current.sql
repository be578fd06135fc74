-- The current rows of a dataset: the newest file of each partition. Tombstones take part in picking
-- the newest file, then are dropped, so a damaged current file never lets an older one pass for current.
SELECT * FROM (SELECT * FROM $raw
QUALIFY dense_rank() OVER (PARTITION BY $partition ORDER BY written_at DESC, run_id DESC) = 1)
WHERE $live
