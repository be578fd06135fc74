-- Where a build was scored only by an older judge version that has a PUBLISHED bridge to a newer
-- one, its mean is carried onto the newer version's scale and the point marked spliced. Where the
-- current bridge run to the newer version is NOT published, the build is a break on the newer
-- version's trend: a row with no mean_score and is_break true (never a value to draw a line through).
-- The score_trend asset's points (score_trend_points) also know builds in registration order and
-- bridges never run.
WITH cal AS (SELECT *
FROM calibration_offsets
WHERE published),
native AS (SELECT build, judge_version AS trend_version, mean_score, false AS spliced, NULL::VARCHAR AS spliced_from, false AS is_break
FROM score_trend),
spliced AS (SELECT t.build, c.judge_to AS trend_version, ((CASE WHEN c.equating_slope IS NOT NULL THEN c.equating_intercept + c.equating_slope * (c.scale_low + t.mean_score * (c.scale_high - c.scale_low)) ELSE c.scale_low + t.mean_score * (c.scale_high - c.scale_low) + c.offset_points END) - c.scale_low) / (c.scale_high - c.scale_low) AS mean_score, true AS spliced, t.judge_version AS spliced_from, false AS is_break
FROM score_trend t
JOIN cal c ON t.judge_version = c.judge_from
WHERE NOT EXISTS (SELECT 1
FROM score_trend n
WHERE n.build = t.build AND n.judge_version = c.judge_to)),
breaks AS (SELECT t.build, c.judge_to AS trend_version, NULL::DOUBLE AS mean_score, false AS spliced, t.judge_version AS spliced_from, true AS is_break
FROM score_trend t
JOIN (SELECT judge_from, judge_to FROM calibration_offsets WHERE NOT published) c ON t.judge_version = c.judge_from
WHERE NOT EXISTS (SELECT 1
FROM score_trend n
WHERE n.build = t.build AND n.judge_version = c.judge_to))
SELECT *
FROM native
UNION ALL
SELECT *
FROM spliced
UNION ALL
SELECT *
FROM breaks
