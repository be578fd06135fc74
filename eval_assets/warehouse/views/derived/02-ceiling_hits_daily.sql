-- A tracked figure: never blocks.
SELECT day, count(*) FILTER (WHERE status = 'refused') AS refused, count(*) AS reservations, count(*) FILTER (WHERE status = 'refused') / count(*) AS hit_rate, list_sort(list_distinct(list(ceiling) FILTER (WHERE ceiling IS NOT NULL))) AS ceilings
FROM cost_ledger
GROUP BY day
ORDER BY day
