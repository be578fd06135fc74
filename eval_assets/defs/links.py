"""Links into the Dagster UI that land on one partition (paths on the same server)."""

from urllib.parse import quote


def partition_url(asset: str, partition: str) -> str:
    """The page of `asset` with its Partitions view open on `partition` (a build, or `build|judge_version`)."""
    return f"/assets/{asset}?view=partitions&partition={quote(partition, safe='')}"


def report_url(build: str, judge_version: str) -> str:
    """The capability report of `build` under `judge_version`, that partition selected."""
    return partition_url("capability_report", f"{build}|{judge_version}")
