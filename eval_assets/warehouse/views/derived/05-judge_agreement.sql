-- Per judge version: agreement with the current human scores of the SAME attempts under the
-- same rubric, on the normalised score (one pair per human score row). kappa_quadratic is
-- 1 - mean (j - h)^2 / E_chance (j - h)^2 with the observed marginals: Cohen's quadratic-weighted
-- kappa (exact for one equally spaced ordinal criterion); alpha is Krippendorff's interval
-- alpha for two coders; spearman_rho is the correlation of mid-ranks. NULL when undefined.
-- n_review: the pairs whose human score came from the review queue (imported_from 'review:ITEM').
WITH pairs AS (SELECT v.judge_version, v.rubric, v.score AS j, h.score AS h, h.author, h.imported_from, v.build || '/' || v.scenario_id || '/' || CAST(v.repeat AS VARCHAR) AS attempt
FROM judge_verdicts v
JOIN human_scores_current h ON v.build = h.build AND v.scenario_id = h.scenario_id AND v.repeat = h.repeat AND v.rubric = h.rubric
WHERE v.status = 'scored' AND v.score IS NOT NULL AND h.score IS NOT NULL),
ranked AS (SELECT *, rank() OVER (PARTITION BY judge_version
ORDER BY j) + (count(*) OVER (PARTITION BY judge_version, j) - 1) / 2.0 AS rj, rank() OVER (PARTITION BY judge_version
ORDER BY h) + (count(*) OVER (PARTITION BY judge_version, h) - 1) / 2.0 AS rh
FROM pairs),
agg AS (SELECT judge_version, any_value(rubric) AS rubric, count(*) AS n, count(DISTINCT attempt) AS n_attempts, count(DISTINCT author) AS n_authors, count(*) FILTER (WHERE imported_from LIKE 'review:%') AS n_review, avg(j) AS judge_mean, avg(h) AS human_mean, avg((j - h) * (j - h)) AS msd, var_pop(j) + var_pop(h) + (avg(j) - avg(h)) * (avg(j) - avg(h)) AS chance_msd, (sum(j * j) + sum(h * h) - (sum(j) + sum(h)) * (sum(j) + sum(h)) / (2.0 * count(*))) / (2.0 * count(*) - 1) AS pooled_var, corr(rj, rh) AS rho
FROM ranked
GROUP BY judge_version)
SELECT judge_version, rubric, n, n_attempts, n_authors, judge_mean, human_mean, CASE WHEN n >= 2 AND chance_msd > 1e-12 THEN 1 - msd / chance_msd END AS kappa_quadratic, CASE WHEN n >= 2 AND pooled_var > 1e-12 THEN 1 - msd / (2 * pooled_var) END AS krippendorff_alpha, CASE WHEN n >= 2 AND isfinite(rho) THEN rho END AS spearman_rho, n_review
FROM agg
ORDER BY judge_version
