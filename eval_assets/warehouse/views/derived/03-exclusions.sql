-- Excluded verdicts per build and judge version.
SELECT build, judge_version, count(*) FILTER (WHERE status = 'excluded') AS excluded, count(*) AS verdicts, count(*) FILTER (WHERE status = 'excluded') / count(*) AS exclusion_rate, count(DISTINCT scenario_id) FILTER (WHERE status = 'excluded') AS excluded_scenarios
FROM judge_verdicts
GROUP BY ALL
ORDER BY ALL
