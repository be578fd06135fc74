-- Every file of a dataset (tombstones dropped): $name_history.
SELECT * FROM $raw WHERE $live
