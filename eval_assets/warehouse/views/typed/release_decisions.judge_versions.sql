list_filter(string_split(coalesce(judge_versions, ''), ','), lambda v: v <> '')
