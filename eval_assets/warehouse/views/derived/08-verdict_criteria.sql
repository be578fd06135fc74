-- Long view for per-criterion analysis: one row per verdict and criterion.
SELECT build, judge_version, scenario_id, repeat, rubric, criterion, TRY_CAST(json_extract_string(criteria, '$."' || criterion || '"') AS DOUBLE) AS value, status, attempt_id
FROM (SELECT *, unnest(json_keys(criteria)) AS criterion
FROM judge_verdicts
WHERE criteria IS NOT NULL)
