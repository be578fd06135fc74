"""Dagster wiring over the domain: assets, checks, sensors, schedules, resources, partitions."""
