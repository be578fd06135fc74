-- Per judge version: agreement with the current human scores of the SAME attempts under the
-- same rubric, on the normalised score (one pair per human score row). A human score is given under a
-- rubric, so it pairs with every judge version using that rubric. kappa_quadratic is
-- 1 - mean (j - h)^2 / E_chance (j - h)^2 with the observed marginals: Cohen's quadratic-weighted
-- kappa (exact for one equally spaced ordinal criterion); alpha is Krippendorff's interval
-- alpha for two coders; spearman_rho is the correlation of mid-ranks. NULL when undefined.
-- n_review: the pairs whose human score came from the review queue (imported_from 'review:ITEM').
-- alpha_lo / alpha_hi: alpha's 95% interval from a cluster bootstrap over SCENARIOS (n_scenarios = G
-- clusters; 1000 replicates, seed 25; replicate b's draw j is the cluster numbered
-- first-15-hex-digits-of sha256('agreement-bootstrap/25/b/j') mod G, scenarios numbered in id order):
-- bias-corrected with a t quantile, (2 alpha - mean) -/+ t(0.975, G - 1) sd of the replicates, the
-- upper end capped at 1; t exact to df 4, Cornish-Fisher (four terms) beyond. Exactly as
-- eval_assets.stats.cluster_bootstrap_alpha computes it (a test holds the two equal; docs/methods.md
-- says why not the percentile interval). n_boot: the replicates whose alpha was defined; NULL
-- interval and 0 with fewer than two scenarios or no alpha.
WITH pairs AS (SELECT v.judge_version, v.rubric, v.scenario_id, v.score AS j, h.score AS h, h.author, h.imported_from, v.build || '/' || v.scenario_id || '/' || CAST(v.repeat AS VARCHAR) AS attempt
FROM judge_verdicts v
JOIN human_scores_current h ON v.build = h.build AND v.scenario_id = h.scenario_id AND v.repeat = h.repeat AND v.rubric = h.rubric
WHERE v.status = 'scored' AND v.score IS NOT NULL AND h.score IS NOT NULL),
ranked AS (SELECT *, rank() OVER (PARTITION BY judge_version
ORDER BY j) + (count(*) OVER (PARTITION BY judge_version, j) - 1) / 2.0 AS rj, rank() OVER (PARTITION BY judge_version
ORDER BY h) + (count(*) OVER (PARTITION BY judge_version, h) - 1) / 2.0 AS rh
FROM pairs),
agg AS (SELECT judge_version, any_value(rubric) AS rubric, count(*) AS n, count(DISTINCT attempt) AS n_attempts, count(DISTINCT author) AS n_authors, count(*) FILTER (WHERE imported_from LIKE 'review:%') AS n_review, avg(j) AS judge_mean, avg(h) AS human_mean, avg((j - h) * (j - h)) AS msd, var_pop(j) + var_pop(h) + (avg(j) - avg(h)) * (avg(j) - avg(h)) AS chance_msd, (sum(j * j) + sum(h * h) - (sum(j) + sum(h)) * (sum(j) + sum(h)) / (2.0 * count(*))) / (2.0 * count(*) - 1) AS pooled_var, corr(rj, rh) AS rho
FROM ranked
GROUP BY judge_version),
clusters AS (SELECT judge_version, scenario_id, dense_rank() OVER (PARTITION BY judge_version
ORDER BY scenario_id) - 1 AS k, count(*) AS n, sum(j) AS sj, sum(h) AS sh, sum(j * j) AS sjj, sum(h * h) AS shh, sum((j - h) * (j - h)) AS sdd
FROM pairs
GROUP BY judge_version, scenario_id),
sizes AS (SELECT judge_version, count(*) AS g
FROM clusters
GROUP BY judge_version),
hashes AS (SELECT r.range AS b, w.j, ('0x' || substr(sha256('agreement-bootstrap/25/' || r.range || '/' || w.j), 1, 15))::BIGINT AS u
FROM range(1000) r, (SELECT unnest(range(max(g))) AS j
FROM sizes) w),
draws AS (SELECT s.judge_version, x.b, x.u % s.g AS k
FROM sizes s
JOIN hashes x ON x.j < s.g),
replicates AS (SELECT d.judge_version, d.b, sum(c.n) AS n, sum(c.sj) AS sj, sum(c.sh) AS sh, sum(c.sjj) AS sjj, sum(c.shh) AS shh, sum(c.sdd) AS sdd
FROM draws d
JOIN clusters c ON c.judge_version = d.judge_version AND c.k = d.k
GROUP BY d.judge_version, d.b),
replicate_alpha AS (SELECT judge_version, CASE WHEN n >= 2 AND pooled_var > 1e-12 THEN 1 - (sdd / n) / (2 * pooled_var) END AS a
FROM (SELECT *, (sjj + shh - (sj + sh) * (sj + sh) / (2.0 * n)) / (2.0 * n - 1) AS pooled_var
FROM replicates)),
boot AS (SELECT judge_version, avg(a) AS mean_a, stddev_samp(a) AS sd_a, count(a) AS n_boot
FROM replicate_alpha
GROUP BY judge_version),
point AS (SELECT a.*, s.g, CASE WHEN n >= 2 AND pooled_var > 1e-12 THEN 1 - msd / (2 * pooled_var) END AS alpha
FROM agg a
JOIN sizes s USING (judge_version))
SELECT p.judge_version, p.rubric, p.n, p.n_attempts, p.g AS n_scenarios, p.n_authors, p.judge_mean, p.human_mean, CASE WHEN p.n >= 2 AND p.chance_msd > 1e-12 THEN 1 - p.msd / p.chance_msd END AS kappa_quadratic, p.alpha AS krippendorff_alpha, CASE WHEN p.alpha IS NOT NULL AND p.g >= 2 AND b.n_boot >= 2 THEN 2 * p.alpha - b.mean_a - (CASE WHEN p.g - 1 = 1 THEN 12.706204736174694 WHEN p.g - 1 = 2 THEN 4.302652729749462 WHEN p.g - 1 = 3 THEN 3.1824463052837078 WHEN p.g - 1 = 4 THEN 2.7764451051977934 ELSE 1.9599639845400536 + 2.3722712302985607 / (p.g - 1) + 2.8224986157396086 / pow(p.g - 1, 2) + 2.555849679507719 / pow(p.g - 1, 3) + 1.5895340533938196 / pow(p.g - 1, 4) END) * b.sd_a END AS alpha_lo, CASE WHEN p.alpha IS NOT NULL AND p.g >= 2 AND b.n_boot >= 2 THEN least(1.0, 2 * p.alpha - b.mean_a + (CASE WHEN p.g - 1 = 1 THEN 12.706204736174694 WHEN p.g - 1 = 2 THEN 4.302652729749462 WHEN p.g - 1 = 3 THEN 3.1824463052837078 WHEN p.g - 1 = 4 THEN 2.7764451051977934 ELSE 1.9599639845400536 + 2.3722712302985607 / (p.g - 1) + 2.8224986157396086 / pow(p.g - 1, 2) + 2.555849679507719 / pow(p.g - 1, 3) + 1.5895340533938196 / pow(p.g - 1, 4) END) * b.sd_a) END AS alpha_hi, CASE WHEN p.alpha IS NOT NULL AND p.g >= 2 THEN b.n_boot ELSE 0 END AS n_boot, CASE WHEN p.n >= 2 AND isfinite(p.rho) THEN p.rho END AS spearman_rho, p.n_review
FROM point p
LEFT JOIN boot b USING (judge_version)
ORDER BY p.judge_version
