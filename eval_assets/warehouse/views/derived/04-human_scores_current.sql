-- Human scores in force: not a pure retraction, not retracted; one row per score_id even if
-- two concurrent imports appended the same row.
SELECT *
FROM human_scores h
WHERE h.criteria IS NOT NULL AND NOT EXISTS (SELECT 1
FROM human_scores r
WHERE r.retracts = h.score_id)
QUALIFY row_number() OVER (PARTITION BY h.score_id
ORDER BY h.written_at, h.run_id) = 1
