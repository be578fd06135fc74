-- Every file of a dataset read straight from Parquet, with its typed columns ($select).
(SELECT $select FROM read_parquet($files, union_by_name = true) d)
