-- The human review queue as last exported from the journal database: one row per item, its state as
-- of now (a claim past its expiry reads as open again), timestamps in UTC, and the human score a
-- done item produced.
SELECT item_id, build, judge_version, scenario_id, repeat, reason, priority, detail, CASE WHEN state = 'claimed' AND (expires_at IS NULL OR expires_at <= epoch(now())) THEN 'open' ELSE state END AS state, CASE WHEN state = 'claimed' AND expires_at > epoch(now()) THEN claimed_by END AS claimed_by, to_timestamp(enqueued_at)::TIMESTAMP AS enqueued_at, to_timestamp(claimed_at)::TIMESTAMP AS claimed_at, to_timestamp(expires_at)::TIMESTAMP AS expires_at, done_by, to_timestamp(done_at)::TIMESTAMP AS done_at, score_id, written_at AS exported_at
FROM review_items
