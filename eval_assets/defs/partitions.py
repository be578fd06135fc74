"""Partitions: builds are registered at run time; judge versions come from judges/."""

import dagster as dg

from eval_assets.defs.project import PROJECT

build_partitions = dg.DynamicPartitionsDefinition(name="build")
judge_version_partitions = dg.StaticPartitionsDefinition(sorted(PROJECT.judges))
build_by_judge = dg.MultiPartitionsDefinition(
    {"build": build_partitions, "judge_version": judge_version_partitions}
)


def build_and_judge(context: dg.AssetExecutionContext) -> tuple[str, str]:
    key = context.partition_key
    assert isinstance(key, dg.MultiPartitionKey)
    return key.keys_by_dimension["build"], key.keys_by_dimension["judge_version"]
