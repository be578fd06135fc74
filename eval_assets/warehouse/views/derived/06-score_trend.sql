-- Trends over builds. A trend never feeds a release decision (those compare one judge version
-- only).
SELECT build, judge_version, avg(score) AS mean_score, count(score) AS scored, count(*) FILTER (WHERE status = 'excluded') AS excluded, max(written_at) AS judged_at
FROM judge_verdicts
WHERE source = 'model'
GROUP BY build, judge_version
