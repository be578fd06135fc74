"""Local models (`local/<name>` in evaltrack.yaml's `local_models:`): weights verified by SHA-256 and a
llama.cpp server on 127.0.0.1 that the run starts and stops (docs/local-models.md). Imports no Dagster
and no litellm."""

from ._server import SUPERVISOR, LocalServers, Route, proc_identity, runtime_problem
from ._weights import SETUP_COMMAND, LocalModelError, cache_dir, fetch, sha256_of, verified, weights_path

__all__ = [
    "SETUP_COMMAND",
    "SUPERVISOR",
    "LocalModelError",
    "LocalServers",
    "Route",
    "cache_dir",
    "fetch",
    "proc_identity",
    "runtime_problem",
    "sha256_of",
    "verified",
    "weights_path",
]
