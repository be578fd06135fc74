"""One llama.cpp server per local model per host, started by the run that needs it and stopped with it.

The run's calling process starts the server (`LocalServers.route`): a free port on 127.0.0.1, a fresh
key for this server (in its environment and in a 0600 state file under $EVAL_HOME/local-models, never
in an argument, a log or a stored row), its log at $EVAL_HOME/logs/local-<name>.log, a readiness check
bounded by the model's `ready_timeout_s`. The server runs under a watchdog (`supervise.py`) that stops
it when the owner is gone, kill -9 included; the owner stops it itself when its command ends. Worker
processes of the run, and any other run on the host while the owner lives, find it through the state
file and share it. A state file whose owner is dead is an orphan's: its processes are killed (when
their start times still match, so a reused pid is never hit) and the file removed before a new start.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import importlib.metadata
import importlib.util
import json
import multiprocessing
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_assets.config import LocalModel, Settings
from eval_assets.home import EvalHome
from eval_assets.redact import redact

from ._weights import SETUP_COMMAND, LocalModelError, cache_dir, verified

SUPERVISOR = Path(__file__).with_name("supervise.py")
_POLL_S = 0.1
_STOP_WAIT_S = 10.0


@dataclass(frozen=True)
class Route:
    """Where a local model answers: litellm's OpenAI-compatible provider at `api_base` with `api_key`."""

    name: str
    api_base: str
    api_key: str = field(repr=False)

    @property
    def litellm_model(self) -> str:
        return f"openai/{self.name}"


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), None if no such
    process (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def _alive(proc: dict[str, int] | None) -> bool:
    return proc is not None and _start_time(proc["pid"]) == proc["start"]


def proc_identity(pid: int) -> dict[str, int]:
    start = _start_time(pid)
    return {"pid": pid, "start": start if start is not None else -1}


def runtime_problem(model: LocalModel) -> str | None:
    """Why the declared runtime cannot run here (not installed, or another version), or None."""
    dist, _, version = model.runtime.partition("==")
    if importlib.util.find_spec("llama_cpp") is None:
        return f"the local model server ({model.runtime}) is not installed: run `{SETUP_COMMAND}`"
    installed = importlib.metadata.version(dist)
    if installed != version:
        return f"{dist} {installed} is installed, not the declared {version}: run `{SETUP_COMMAND}`"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(api_base: str, key: str) -> bool:
    request = urllib.request.Request(f"{api_base}/models", headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=1.0) as response:  # noqa: S310 (127.0.0.1 only)
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _log_tail(path: Path, lines: int = 3) -> str:
    try:
        tail = path.read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return ""
    return redact(" | ".join(line.strip() for line in tail))[:400]


class LocalServers:
    """The local model servers of one process's runs: started on first need, shared through state files,
    stopped by `stop_all` (the command's end, and at exit)."""

    def __init__(self, home: EvalHome, settings: Settings, project_root: Path):
        self.settings = settings
        self.cache = cache_dir(settings, home, project_root)
        self.state_dir = home.local_model_state
        self.log_dir = home.logs
        self._owned: dict[str, subprocess.Popen[bytes]] = {}
        self._routes: dict[str, tuple[Route, dict[str, Any]]] = {}
        self._exit_hook = False

    def declared(self, name: str) -> LocalModel:
        model = self.settings.local_models.get(name)
        if model is None:
            raise LocalModelError(
                f"local model {name!r} is not declared under `local_models:` in evaltrack.yaml"
            )
        return model

    def check(self, name: str) -> None:
        """Raise LocalModelError naming the setup command when `name` could not be served here: no
        runtime, or no verified weights. The run is refused before its first call."""
        model = self.declared(name)
        if (why := runtime_problem(model)) is not None:
            raise LocalModelError(f"local model {name!r}: {why}")
        verified(name, model, self.cache)

    def route(self, name: str) -> Route:
        """The running server of `name` (this process's, a live owner's), or one started now (not in a
        worker process of a run: its calling process starts the servers before the workers)."""
        cached = self._routes.get(name)
        if cached is not None and _alive(cached[1]["supervisor"]) and _alive(cached[1]["owner"]):
            return cached[0]
        with self._locked(name):
            state = self._read(name)
            if state is not None and _alive(state["owner"]) and _alive(state["supervisor"]):
                return self._remember(name, state)
            if state is not None:
                self._reap(name, state)
            if multiprocessing.parent_process() is not None:
                raise LocalModelError(
                    f"local model {name!r}: no server is running (the run's calling process starts it)"
                )
            return self._remember(name, self._start(name))

    def stop_all(self) -> None:
        """Stop every server this process started (the watchdog stops the server), and forget them."""
        for name, supervisor in list(self._owned.items()):
            if supervisor.poll() is None:
                supervisor.send_signal(signal.SIGTERM)
                try:
                    supervisor.wait(_STOP_WAIT_S)
                except subprocess.TimeoutExpired:
                    supervisor.kill()
                    supervisor.wait()
            with self._locked(name):
                state = self._read(name)
                if state is not None and state["supervisor"]["pid"] == supervisor.pid:
                    self._state_path(name).unlink(missing_ok=True)
            del self._owned[name]
            self._routes.pop(name, None)

    # --- internals ---------------------------------------------------------------------------

    def _state_path(self, name: str) -> Path:
        return self.state_dir / f"{name}.json"

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with (self.state_dir / f"{name}.lock").open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _read(self, name: str) -> dict[str, Any] | None:
        try:
            state = json.loads(self._state_path(name).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            self._state_path(name).unlink(missing_ok=True)  # a damaged state file names no server
            return None
        return state if isinstance(state, dict) else None

    def _remember(self, name: str, state: dict[str, Any]) -> Route:
        route = Route(name, f"http://127.0.0.1:{state['port']}/v1", state["key"])
        self._routes[name] = (route, state)
        return route

    def _reap(self, name: str, state: dict[str, Any]) -> None:
        """An orphan's state (its owner is dead): kill what still runs of it, then forget it."""
        for role in ("server", "supervisor"):
            proc = state.get(role)
            if isinstance(proc, dict) and _alive(proc):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc["pid"], signal.SIGKILL)
        self._state_path(name).unlink(missing_ok=True)

    def _start(self, name: str) -> dict[str, Any]:
        model = self.declared(name)
        if (why := runtime_problem(model)) is not None:
            raise LocalModelError(f"local model {name!r}: {why}")
        weights = verified(name, model, self.cache)
        port, key = _free_port(), secrets.token_urlsafe(24)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"local-{name}.log"
        server = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(weights), "--model_alias", name,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(model.context_size),
            "--n_threads", str(model.threads), "--n_threads_batch", str(model.threads),
            "--verbose", "False",
            # a fresh sampler seed per start: a fixed one repeats the same outputs in every run, so two
            # unchanged builds would agree exactly (a call that names its `seed` still gets that seed)
            "--seed", str(secrets.randbelow(2**31)),
        ]  # fmt: skip
        if model.chat_format is not None:
            server += ["--chat_format", model.chat_format]
        # a clean environment: the server reads settings from variables (HOST, PORT, MODEL, ...) too
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "API_KEY": key,
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        with log_path.open("ab") as log:
            supervisor = subprocess.Popen(  # noqa: S603
                [sys.executable, "-I", str(SUPERVISOR), str(os.getpid()), "--", *server],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,  # a Ctrl-C of the terminal reaches the owner, which stops it
            )
        self._owned[name] = supervisor
        if not self._exit_hook:
            atexit.register(self.stop_all)
            self._exit_hook = True
        api_base = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + model.ready_timeout_s
        while not _answers(api_base, key):
            if supervisor.poll() is not None or time.monotonic() > deadline:
                why = (
                    f"exited with {supervisor.returncode}"
                    if supervisor.poll() is not None
                    else f"did not answer within {model.ready_timeout_s:g}s"
                )
                self.stop_all()
                raise LocalModelError(
                    f"local model {name!r}: the server {why} (log {log_path}: {_log_tail(log_path)})"
                )
            time.sleep(_POLL_S)
        state = {
            "name": name,
            "port": port,
            "key": key,
            "sha256": model.sha256,
            "runtime": model.runtime,
            "owner": proc_identity(os.getpid()),
            "supervisor": proc_identity(supervisor.pid),
            "server": _server_proc(supervisor.pid),
        }
        path = self._state_path(name)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(state, fh)
        os.replace(tmp, path)
        return state


def _server_proc(supervisor_pid: int) -> dict[str, int] | None:
    """The watchdog's child (the server), read from /proc: the orphan reaper's second target."""
    try:
        children = Path(f"/proc/{supervisor_pid}/task/{supervisor_pid}/children").read_text().split()
    except OSError:
        return None
    return proc_identity(int(children[0])) if children else None
