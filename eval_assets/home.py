"""EVAL_HOME: the one directory holding all runtime state (git-ignored)."""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
FENCE_SECRET_FILE = "fence.secret"
FENCE_SECRET_BYTES = 32

DAGSTER_YAML = """\
# Written by eval-track. Local instance for `evaltrack demo`, `run` and `ui`.
telemetry:
  enabled: false
nux:
  enabled: false
# Run monitoring (the daemon of `evaltrack ui` runs it): a run whose worker never starts, or that
# outlives a `dagster/max_runtime` tag, is marked failed instead of staying STARTING/STARTED forever.
# Runs of `evaltrack run`/`demo` execute in the CLI's process: one killed with kill -9 is marked
# failed by the next `evaltrack` command on this host (eval_assets.cli.orchestrate.fail_orphaned_runs).
run_monitoring:
  enabled: true
  start_timeout_seconds: 180
  cancel_timeout_seconds: 180
  max_resume_run_attempts: 0
  poll_interval_seconds: 30
# a loaded machine can take minutes to import the code location; Dagster's default gives up after 180 s
code_servers:
  local_startup_timeout: 900
"""
_WRITTEN_BY = "# Written by eval-track."


def default_home() -> Path:
    return Path(os.environ.get("EVAL_HOME") or PROJECT_ROOT / ".eval_home").resolve()


def project_root() -> Path:
    return Path(os.environ.get("EVAL_PROJECT_ROOT") or PROJECT_ROOT).resolve()


@dataclass(frozen=True)
class EvalHome:
    root: Path

    @property
    def dagster(self) -> Path:
        return self.root / "dagster"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    @property
    def builds(self) -> Path:
        return self.root / "builds"

    @property
    def journal_url(self) -> str:
        return f"sqlite:///{self.root / 'journal.sqlite'}"

    def ensure(self) -> EvalHome:
        """Create the layout and `dagster/dagster.yaml` (telemetry off). Idempotent."""
        for d in (self.dagster, self.warehouse, self.builds):
            d.mkdir(parents=True, exist_ok=True)
        cfg = self.dagster / "dagster.yaml"
        # an older eval-track template is brought up to date; a file someone wrote themselves is theirs
        if not cfg.exists() or (cfg.read_text().startswith(_WRITTEN_BY) and cfg.read_text() != DAGSTER_YAML):
            tmp = cfg.with_name(f".dagster.yaml.{os.getpid()}.tmp")
            tmp.write_text(DAGSTER_YAML)
            os.replace(tmp, cfg)
        return self

    @property
    def fence_secret_path(self) -> Path:
        return self.root / FENCE_SECRET_FILE

    def fence_secret(self) -> bytes:
        """This home's fence secret (judging.fence_nonce), made once: 32 random bytes in
        `fence.secret`, mode 0600, published with a hard link (two processes starting at once agree on one).

        Raises ValueError naming the file when it exists but is not a secret this function wrote.
        """
        path = self.fence_secret_path
        if not path.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".fence.", dir=self.root)  # mode 0600
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(secrets.token_bytes(FENCE_SECRET_BYTES).hex().encode())
                    out.flush()
                    os.fsync(out.fileno())
                with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
                    os.link(tmp, path)
            finally:
                os.unlink(tmp)
        text = path.read_bytes()
        try:
            secret = bytes.fromhex(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            secret = b""
        if len(secret) != FENCE_SECRET_BYTES:
            raise ValueError(
                f"{path}: fence secret: expected {2 * FENCE_SECRET_BYTES} hex digits "
                f"(delete the file to make a new one; prompts of earlier runs then render differently)"
            )
        return secret
