"""A small client for the Dagster webserver's GraphQL endpoint (POST /graphql)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

WORKSPACE = """
query {
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError {
          __typename
          ... on RepositoryLocation { name repositories { name } }
          ... on PythonError { message }
        }
      }
    }
  }
}
"""

RUNS = """
query Runs($limit: Int) {
  runsOrError(limit: $limit) {
    __typename
    ... on Runs {
      results {
        runId
        status
        assetSelection { path }
        tags { key value }
        repositoryOrigin { repositoryLocationName repositoryName }
      }
    }
  }
}
"""

MATERIALIZATIONS = """
query Materializations($path: [String!]!, $partitions: [String!]) {
  assetOrError(assetKey: {path: $path}) {
    __typename
    ... on Asset {
      assetMaterializations(partitions: $partitions) {
        partition
        runId
        timestamp
        metadataEntries {
          label
          __typename
          ... on TextMetadataEntry { text }
          ... on JsonMetadataEntry { jsonString }
          ... on BoolMetadataEntry { boolValue }
          ... on IntMetadataEntry { intValue }
          ... on MarkdownMetadataEntry { mdStr }
        }
      }
    }
  }
}
"""

SENSOR = """
query Sensor($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    __typename
    ... on Sensor {
      name
      sensorType
      sensorState {
        status
        ticks(limit: 50) { id status timestamp skipReason runIds error { message } }
      }
    }
  }
}
"""

SCHEDULE = """
query Schedule($selector: ScheduleSelector!) {
  scheduleOrError(scheduleSelector: $selector) {
    __typename
    ... on Schedule { name cronSchedule executionTimezone scheduleState { status } }
  }
}
"""

IN_PROGRESS = {"QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING", "MANAGED"}


class GraphQLError(Exception):
    pass


class DagsterGraphQL:
    def __init__(self, base_url: str, timeout_s: float = 30.0):
        self.url = f"{base_url}/graphql"
        self.timeout_s = timeout_s

    def query(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310
            payload = json.loads(response.read())
        if payload.get("errors"):
            raise GraphQLError(json.dumps(payload["errors"])[:2000])
        return payload["data"]  # type: ignore[no-any-return]

    def reachable(self) -> bool:
        try:
            self.query("query { version }")
        except (OSError, GraphQLError, ValueError):
            return False
        return True

    def loaded_location(self) -> tuple[str, str] | None:
        """(location name, repository name) once the code location has loaded, else None.

        A location that failed to load raises: waiting longer would not help."""
        data = self.query(WORKSPACE)["workspaceOrError"]
        if data["__typename"] != "Workspace":
            return None
        for entry in data["locationEntries"]:
            loaded = entry["locationOrLoadError"]
            if loaded is None:
                continue
            if loaded["__typename"] == "PythonError":
                raise GraphQLError(f"code location {entry['name']} failed to load: {loaded['message']}")
            if entry["loadStatus"] == "LOADED" and loaded["repositories"]:
                return entry["name"], loaded["repositories"][0]["name"]
        return None

    def runs(self) -> list[dict[str, Any]]:
        data = self.query(RUNS, {"limit": 100})["runsOrError"]
        assert data["__typename"] == "Runs", data
        out = []
        for run in data["results"]:
            run["tags"] = {t["key"]: t["value"] for t in run["tags"]}
            run["assets"] = sorted("/".join(a["path"]) for a in run["assetSelection"] or [])
            out.append(run)
        return out

    def materializations(self, asset: str, partition: str) -> list[dict[str, Any]]:
        data = self.query(MATERIALIZATIONS, {"path": [asset], "partitions": [partition]})["assetOrError"]
        if data["__typename"] != "Asset":  # AssetNotFoundError until the first materialization
            return []
        out = []
        for event in data["assetMaterializations"]:
            meta: dict[str, Any] = {}
            for entry in event["metadataEntries"]:
                if "jsonString" in entry:
                    meta[entry["label"]] = json.loads(entry["jsonString"])
                else:
                    value = [v for k, v in entry.items() if k not in ("label", "__typename")]
                    meta[entry["label"]] = value[0] if value else None
            out.append({**event, "metadata": meta})
        return out

    def sensor(self, location: str, repository: str, name: str) -> dict[str, Any]:
        selector = {"repositoryLocationName": location, "repositoryName": repository, "sensorName": name}
        data = self.query(SENSOR, {"selector": selector})["sensorOrError"]
        assert data["__typename"] == "Sensor", data
        return data  # type: ignore[no-any-return]

    def schedule(self, location: str, repository: str, name: str) -> dict[str, Any]:
        selector = {"repositoryLocationName": location, "repositoryName": repository, "scheduleName": name}
        data = self.query(SCHEDULE, {"selector": selector})["scheduleOrError"]
        assert data["__typename"] == "Schedule", data
        return data  # type: ignore[no-any-return]
