"""Partitions: builds are registered at run time; judge versions come from the project's judges/."""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from eval_assets.config import Project

build_partitions = dg.DynamicPartitionsDefinition(name="build")


@dataclass(frozen=True)
class Partitions:
    """The partitions a project's code location is built on: one set per location load, shared by its
    assets, checks and jobs."""

    judge_version: dg.StaticPartitionsDefinition
    build_by_judge: dg.MultiPartitionsDefinition

    @classmethod
    def of(cls, project: Project) -> Partitions:
        judge_version = dg.StaticPartitionsDefinition(sorted(project.judges))
        return cls(
            judge_version=judge_version,
            build_by_judge=dg.MultiPartitionsDefinition({"build": build_partitions, "judge_version": judge_version}),
        )


def build_and_judge(context: dg.AssetExecutionContext) -> tuple[str, str]:
    key = context.partition_key
    assert isinstance(key, dg.MultiPartitionKey)
    return key.keys_by_dimension["build"], key.keys_by_dimension["judge_version"]
