-- Every file of a dataset read straight from Parquet, with its typed columns ($select).
(SELECT $select FROM read_parquet('$glob', union_by_name = true) d)
