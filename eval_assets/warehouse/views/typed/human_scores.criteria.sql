CAST(criteria AS JSON)
