-- Trends over builds. A trend never feeds a release decision (those compare one judge version
-- only). The mean is summed exactly (DECIMAL): a DOUBLE sum depends on the order the files are read
-- in, and the score_trend asset stores this figure, so two equal runs must give the same bits.
SELECT build, judge_version, avg(score::DECIMAL(38, 18))::DOUBLE AS mean_score, count(score) AS scored, count(*) FILTER (WHERE status = 'excluded') AS excluded, max(written_at) AS judged_at
FROM judge_verdicts
WHERE source = 'model'
GROUP BY build, judge_version
