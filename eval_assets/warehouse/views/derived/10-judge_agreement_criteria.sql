-- Per judge version and criterion: agreement of the judge's criterion values with the current human
-- scores' values of the same criterion, on the same attempts under the same rubric (one pair per human
-- score row that gives the criterion; a human score pairs with every judge version using its rubric).
-- krippendorff_alpha is the interval alpha for two coders, as in judge_agreement, on the criterion's
-- own scale; NULL when undefined (fewer than 2 pairs, no variance). alpha_lo / alpha_hi / n_boot /
-- n_scenarios: the same cluster-bootstrap interval over scenarios as judge_agreement (1000
-- replicates, seed 25, the same draws, bias-corrected t), per judge version x criterion.
WITH judged AS (SELECT build, scenario_id, repeat, rubric, judge_version, criterion, value
FROM verdict_criteria
WHERE status = 'scored' AND value IS NOT NULL),
human AS (SELECT build, scenario_id, repeat, rubric, criterion, TRY_CAST(json_extract_string(criteria, '$."' || criterion || '"') AS DOUBLE) AS value
FROM (SELECT *, unnest(json_keys(criteria)) AS criterion
FROM human_scores_current)),
pairs AS (SELECT j.judge_version, j.rubric, j.criterion, j.scenario_id, j.value AS j, h.value AS h
FROM judged j
JOIN human h ON j.build = h.build AND j.scenario_id = h.scenario_id AND j.repeat = h.repeat AND j.rubric = h.rubric AND j.criterion = h.criterion
WHERE h.value IS NOT NULL),
agg AS (SELECT judge_version, criterion, any_value(rubric) AS rubric, count(*) AS n, avg(j) AS judge_mean, avg(h) AS human_mean, avg((j - h) * (j - h)) AS msd, (sum(j * j) + sum(h * h) - (sum(j) + sum(h)) * (sum(j) + sum(h)) / (2.0 * count(*))) / (2.0 * count(*) - 1) AS pooled_var
FROM pairs
GROUP BY judge_version, criterion),
clusters AS (SELECT judge_version, criterion, scenario_id, dense_rank() OVER (PARTITION BY judge_version, criterion
ORDER BY scenario_id) - 1 AS k, count(*) AS n, sum(j) AS sj, sum(h) AS sh, sum(j * j) AS sjj, sum(h * h) AS shh, sum((j - h) * (j - h)) AS sdd
FROM pairs
GROUP BY judge_version, criterion, scenario_id),
sizes AS (SELECT judge_version, criterion, count(*) AS g
FROM clusters
GROUP BY judge_version, criterion),
hashes AS (SELECT r.range AS b, w.j, ('0x' || substr(sha256('agreement-bootstrap/25/' || r.range || '/' || w.j), 1, 15))::BIGINT AS u
FROM range(1000) r, (SELECT unnest(range(max(g))) AS j
FROM sizes) w),
draws AS (SELECT s.judge_version, s.criterion, x.b, x.u % s.g AS k
FROM sizes s
JOIN hashes x ON x.j < s.g),
replicates AS (SELECT d.judge_version, d.criterion, d.b, sum(c.n) AS n, sum(c.sj) AS sj, sum(c.sh) AS sh, sum(c.sjj) AS sjj, sum(c.shh) AS shh, sum(c.sdd) AS sdd
FROM draws d
JOIN clusters c ON c.judge_version = d.judge_version AND c.criterion = d.criterion AND c.k = d.k
GROUP BY d.judge_version, d.criterion, d.b),
replicate_alpha AS (SELECT judge_version, criterion, CASE WHEN n >= 2 AND pooled_var > 1e-12 THEN 1 - (sdd / n) / (2 * pooled_var) END AS a
FROM (SELECT *, (sjj + shh - (sj + sh) * (sj + sh) / (2.0 * n)) / (2.0 * n - 1) AS pooled_var
FROM replicates)),
boot AS (SELECT judge_version, criterion, avg(a) AS mean_a, stddev_samp(a) AS sd_a, count(a) AS n_boot
FROM replicate_alpha
GROUP BY judge_version, criterion),
point AS (SELECT a.*, s.g, CASE WHEN n >= 2 AND pooled_var > 1e-12 THEN 1 - msd / (2 * pooled_var) END AS alpha
FROM agg a
JOIN sizes s USING (judge_version, criterion))
SELECT p.judge_version, p.rubric, p.criterion, p.n, p.g AS n_scenarios, p.judge_mean, p.human_mean, p.alpha AS krippendorff_alpha, CASE WHEN p.alpha IS NOT NULL AND p.g >= 2 AND b.n_boot >= 2 THEN 2 * p.alpha - b.mean_a - (CASE WHEN p.g - 1 = 1 THEN 12.706204736174694 WHEN p.g - 1 = 2 THEN 4.302652729749462 WHEN p.g - 1 = 3 THEN 3.1824463052837078 WHEN p.g - 1 = 4 THEN 2.7764451051977934 ELSE 1.9599639845400536 + 2.3722712302985607 / (p.g - 1) + 2.8224986157396086 / pow(p.g - 1, 2) + 2.555849679507719 / pow(p.g - 1, 3) + 1.5895340533938196 / pow(p.g - 1, 4) END) * b.sd_a END AS alpha_lo, CASE WHEN p.alpha IS NOT NULL AND p.g >= 2 AND b.n_boot >= 2 THEN least(1.0, 2 * p.alpha - b.mean_a + (CASE WHEN p.g - 1 = 1 THEN 12.706204736174694 WHEN p.g - 1 = 2 THEN 4.302652729749462 WHEN p.g - 1 = 3 THEN 3.1824463052837078 WHEN p.g - 1 = 4 THEN 2.7764451051977934 ELSE 1.9599639845400536 + 2.3722712302985607 / (p.g - 1) + 2.8224986157396086 / pow(p.g - 1, 2) + 2.555849679507719 / pow(p.g - 1, 3) + 1.5895340533938196 / pow(p.g - 1, 4) END) * b.sd_a) END AS alpha_hi, CASE WHEN p.alpha IS NOT NULL AND p.g >= 2 THEN b.n_boot ELSE 0 END AS n_boot
FROM point p
LEFT JOIN boot b USING (judge_version, criterion)
ORDER BY p.judge_version, p.criterion
