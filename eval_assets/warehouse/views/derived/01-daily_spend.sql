-- Spend per day, model and role (refused reservations left out).
SELECT day, model, role, count(*) AS calls, sum(coalesce(cost_usd, 0)) AS cost_usd, sum(CASE WHEN status = 'reserved' THEN reserved_usd ELSE 0 END) AS unsettled_reserved_usd
FROM cost_ledger
WHERE status <> 'refused'
GROUP BY ALL
ORDER BY ALL
