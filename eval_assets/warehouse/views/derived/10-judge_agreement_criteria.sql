-- Per judge version and criterion: agreement of the judge's criterion values with the current human
-- scores' values of the same criterion, on the same attempts under the same rubric (one pair per human
-- score row that gives the criterion). krippendorff_alpha is the interval alpha for two coders, as in
-- judge_agreement, on the criterion's own scale; NULL when undefined (fewer than 2 pairs, no variance).
WITH judged AS (SELECT build, scenario_id, repeat, rubric, judge_version, criterion, value
FROM verdict_criteria
WHERE status = 'scored' AND value IS NOT NULL),
human AS (SELECT build, scenario_id, repeat, rubric, criterion, TRY_CAST(json_extract_string(criteria, '$."' || criterion || '"') AS DOUBLE) AS value
FROM (SELECT *, unnest(json_keys(criteria)) AS criterion
FROM human_scores_current)),
pairs AS (SELECT j.judge_version, j.rubric, j.criterion, j.value AS j, h.value AS h
FROM judged j
JOIN human h ON j.build = h.build AND j.scenario_id = h.scenario_id AND j.repeat = h.repeat AND j.rubric = h.rubric AND j.criterion = h.criterion
WHERE h.value IS NOT NULL),
agg AS (SELECT judge_version, criterion, any_value(rubric) AS rubric, count(*) AS n, avg(j) AS judge_mean, avg(h) AS human_mean, avg((j - h) * (j - h)) AS msd, (sum(j * j) + sum(h * h) - (sum(j) + sum(h)) * (sum(j) + sum(h)) / (2.0 * count(*))) / (2.0 * count(*) - 1) AS pooled_var
FROM pairs
GROUP BY judge_version, criterion)
SELECT judge_version, rubric, criterion, n, judge_mean, human_mean, CASE WHEN n >= 2 AND pooled_var > 1e-12 THEN 1 - msd / (2 * pooled_var) END AS krippendorff_alpha
FROM agg
ORDER BY judge_version, criterion
