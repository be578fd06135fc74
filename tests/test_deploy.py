"""The deployment files: the image's build context (assembled and checked without a Docker daemon or a
registry), the values-file checker against a chart-shaped schema, and the Helm values against the
project (the code location, the lock's Dagster release, the instance settings, secrets by reference)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import yaml

from eval_assets.config import Project
from eval_assets.home import PROJECT_ROOT

VALUES = PROJECT_ROOT / "deploy" / "helm" / "values.yaml"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, PROJECT_ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it is executed
    spec.loader.exec_module(module)
    return module


image_context = _script("image_context")
check_helm_values = _script("check_helm_values")


def test_the_image_context_is_assembled_as_a_tar_and_every_check_holds(tmp_path: Path) -> None:
    out = tmp_path / "context.tar"
    count = image_context.write_tar(out)
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert names == image_context.context_files() and len(names) == count
    assert {"Dockerfile", "requirements.lock", "requirements-k8s.lock", "eval_assets/definitions.py"} <= set(
        names
    )
    assert not [n for n in names if set(n.split("/")) & set(image_context.FORBIDDEN)]
    assert not [n for n in names if n.endswith((".pyc", ".sqlite", ".duckdb"))]
    assert image_context.check_context() == []


def _fake_root(tmp_path: Path, dockerfile: str) -> Path:
    root = tmp_path / "root"
    (root / "eval_assets").mkdir(parents=True)
    (root / "eval_assets" / "definitions.py").write_text("")
    for name in ("pyproject.toml", "requirements.lock", "requirements-k8s.lock", ".dockerignore"):
        shutil.copy(PROJECT_ROOT / name, root / name)
    (root / "Dockerfile").write_text(dockerfile)
    (root / ".venv").mkdir()
    (root / ".venv" / "marker").write_text("")
    return root


def test_the_image_checks_name_each_broken_rule(tmp_path: Path) -> None:
    good = (PROJECT_ROOT / "Dockerfile").read_text()
    good = re.sub(r"COPY (scenarios|judges|rubrics|gates|examples|docs|tests|scripts) .*\n", "", good)
    good = good.replace(
        "COPY pyproject.toml workspace.yaml evaltrack.yaml README.md ./", "COPY pyproject.toml ./"
    )
    assert image_context.check_context(_fake_root(tmp_path / "ok", good)) == []
    broken = {
        "FROM": good.replace("FROM python:3.11.14-slim-bookworm", "FROM python:latest"),
        "USER": good.replace("USER 10001:10001", "USER root"),
        "COPY missing": good.replace("COPY eval_assets ./eval_assets", "COPY missing ./missing"),
        "uv pip sync": good.replace("uv pip sync", "uv pip install -r"),
        "pip install litellm": good.replace("--no-deps --python", "litellm --no-deps --python"),
        "byte-compiled": good.replace("--compile-bytecode ", ""),
        "CMD": good.replace("eval_assets.definitions", "other.module"),
    }
    for expected, dockerfile in broken.items():
        problems = image_context.check_context(_fake_root(tmp_path / expected.replace(" ", "_"), dockerfile))
        assert any(expected.split()[0] in p for p in problems), (expected, problems)


SCHEMA = {
    "type": "object",
    "properties": {
        "global": {"$ref": "#/definitions/Global"},
        "runLauncher": {"$ref": "#/definitions/RunLauncher"},
        "podSecurityContext": {"$ref": "https://kubernetesjsonschema.dev/v1.18.0/_definitions.json#/x"},
    },
    "definitions": {
        "Global": {"type": "object", "properties": {"postgresqlSecretName": {"type": "string"}}},
        "RunLauncher": {
            "type": "object",
            "properties": {
                "type": {"enum": ["K8sRunLauncher", "CeleryK8sRunLauncher"]},
                "config": {"type": "object", "properties": {}},
            },
            "allOf": [
                {
                    "if": {"properties": {"type": {"const": "K8sRunLauncher"}}},
                    "then": {
                        "properties": {
                            "config": {
                                "properties": {
                                    "k8sRunLauncher": {
                                        "type": "object",
                                        "properties": {
                                            "envSecrets": {"type": "array", "items": {"type": "object"}}
                                        },
                                    }
                                }
                            }
                        }
                    },
                }
            ],
        },
    },
}


def test_every_key_is_checked_and_an_undeclared_key_is_reported_even_where_the_schema_would_let_it_pass() -> (
    None
):
    values = {
        "global": {"postgresqlSecretName": "pg"},
        "runLauncher": {
            "type": "K8sRunLauncher",
            "config": {"k8sRunLauncher": {"envSecrets": [{"name": "s"}]}},
        },
        "podSecurityContext": {"runAsUser": 10001},
    }
    report = check_helm_values.check_values(values, SCHEMA)
    assert report.ok and report.checked == 9 and report.external == ["podSecurityContext.runAsUser"]
    bad = {**values, "dagsterInstance": {"storage": {}}, "global": {"postgresqlSecretName": 5}}
    bad["runLauncher"] = {"type": "Other", "config": {"k8sRunLauncher": {"env_vars": []}}}
    report = check_helm_values.check_values(bad, SCHEMA)
    assert report.unknown == ["runLauncher.config.k8sRunLauncher.env_vars", "dagsterInstance"]
    assert [p.split(":")[0] for p in report.wrong_type] == ["global.postgresqlSecretName", "runLauncher.type"]


# The shape pydantic 2 gives the chart's schema (chart releases of 2025-26): `$defs`, and
# `additionalProperties: true` on models with extra="allow" (the root, `ingress`) beside their declared
# properties, and on free-form maps (`additionalInstanceConfig`, `dagsterDaemon.runMonitoring`) without any.
SCHEMA_PYDANTIC2 = {
    "additionalProperties": True,
    "type": "object",
    "properties": {
        "ingress": {"$ref": "#/$defs/Ingress"},
        "additionalInstanceConfig": {
            "anyOf": [{"additionalProperties": True, "type": "object"}, {"type": "null"}]
        },
    },
    "$defs": {
        "Ingress": {
            "additionalProperties": True,
            "type": "object",
            "properties": {"enabled": {"type": "boolean"}},
        },
    },
}


def test_a_model_open_to_extra_keys_still_reports_them_and_a_free_form_map_takes_nested_keys() -> None:
    values = {
        "ingress": {"enabled": False},
        "additionalInstanceConfig": {"run_monitoring": {"enabled": True, "poll_interval_seconds": 30}},
    }
    report = check_helm_values.check_values(values, SCHEMA_PYDANTIC2)
    assert report.ok and report.unknown == [] and report.checked == 6
    bad = {**values, "dagsterInstance": "postgres", "ingress": {"enabled": False, "hosts": []}}
    report = check_helm_values.check_values(bad, SCHEMA_PYDANTIC2)
    assert report.unknown == ["ingress.hosts", "dagsterInstance"]


def test_the_checker_refuses_an_unreadable_schema_naming_the_file(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    schema = tmp_path / "values.schema.json"
    schema.write_text("{not json")
    assert check_helm_values.main([str(VALUES), "--schema", str(schema), "--chart-version", "1.13.27"]) == 2
    assert str(schema) in capsys.readouterr().err


def test_the_helm_values_serve_this_code_location_at_the_locked_release_with_secrets_by_reference(
    project: Project,
) -> None:
    text = VALUES.read_text()
    values = yaml.safe_load(text)
    locked = image_context._locked((PROJECT_ROOT / "requirements-k8s.lock").read_text())
    assert f"version {locked['dagster']}" in text and f"--version {locked['dagster']}" in text
    assert locked["dagster-k8s"] == locked["dagster-postgres"]
    [deployment] = values["dagster-user-deployments"]["deployments"]
    assert deployment["dagsterApiGrpcArgs"] == ["--module-name", "eval_assets.definitions"]
    assert deployment["includeConfigInLaunchedRuns"] == {"enabled": True}
    env = {e["name"]: e["value"] for e in deployment["env"]}
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text()
    assert f"EVAL_HOME={env['EVAL_HOME']}" in dockerfile
    mounts = {m["mountPath"] for m in deployment["volumeMounts"]}
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    assert mounts == {env["EVAL_HOME"]} == {m["mountPath"] for m in launcher["volumeMounts"]}
    assert launcher["envSecrets"] == deployment["envSecrets"] and launcher["envVars"] == []
    assert values["postgresql"]["postgresqlScheme"] == "postgresql+psycopg2"
    assert (
        values["postgresql"]["postgresqlPassword"] == ""
        and values["generatePostgresqlPasswordSecret"] is False
    )
    assert values["global"]["postgresqlSecretName"]
    assert values["dagsterDaemon"]["runCoordinator"]["type"] == "QueuedRunCoordinator"
    instance = project.settings.instance
    assert values["concurrency"]["runs"]["maxConcurrentRuns"] == instance.max_concurrent_runs
    assert values["concurrency"]["pools"]["defaultLimit"] == instance.pools.default_limit
    assert values["telemetry"] == {"enabled": False}


def test_the_helm_values_share_no_volume_between_pods() -> None:
    """The object-storage layout (docs/deploy.md): the code server and every run pod get EVAL_HOME as
    an emptyDir of their own; nothing is mounted from a claim, so no ReadWriteMany class is needed.
    What used to need one comes from the bucket (manifests), the environment (the fence secret) and
    the instance (notices), as the header says."""
    values = yaml.safe_load(VALUES.read_text())
    [deployment] = values["dagster-user-deployments"]["deployments"]
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    for volumes in (deployment["volumes"], launcher["volumes"]):
        assert [set(v) for v in volumes] == [{"name", "emptyDir"}], volumes
    env = {e["name"]: e["value"] for e in deployment["env"]}
    assert env["EVAL_HOME_SCRATCH"] == "1"  # so a missing warehouse/journal setting is refused, not lost
    header = VALUES.read_text().split("\nglobal:", 1)[0]
    for needed in (
        "EVAL_FENCE_SECRET",
        "PGPASSWORD",
        "warehouse: {url, catalog}",
        "spend.journal_url",
        "builds/",
    ):
        assert needed in header, needed
