"""The build registry under EVAL_HOME/builds: register, list, resolve (once), and the loadable ones.

With the warehouse on object storage the registry is the bucket's `builds/` prefix and
EVAL_HOME/builds its local copy: `build add` uploads the manifest, and every read first pulls what the
bucket holds (each copy with the object's mtime, so registration order is the same in every pod): a
run pod needs no shared volume to read the manifest `evaltrack build add` stored in another.

A build id is resolved into its `BuildManifest` once per materialization (`resolve`) and the manifest
is passed down from there; nothing below re-reads the YAML. Only the project configuration is
needed here (no engine, journal or warehouse), so registering or refusing a manifest is cheap.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from eval_assets.capability.errors import TrackError
from eval_assets.config import (
    BuildManifest,
    ConfigError,
    Judge,
    Problem,
    Project,
    Scenario,
    id_problem,
    load_build,
)
from eval_assets.home import EvalHome, kept_in_scratch
from eval_assets.safe_write import write_file


def judges_for(project: Project, build: BuildManifest) -> list[Judge]:
    """The judge versions a build is scored by: the manifest's list, else every active version."""
    if build.judges is not None:
        return [project.judges[j] for j in build.judges]
    return project.active_judges


def scenarios_for(project: Project, build: BuildManifest) -> list[Scenario]:
    """The scenarios a build runs: those its judge versions score, in id order."""
    names = {j.name for j in judges_for(project, build)}
    return [s for _, s in sorted(project.scenarios.items()) if s.judge in names]


class Builds:
    """The registered build manifests of one EVAL_HOME, validated against one project."""

    def __init__(self, project: Project, home: EvalHome):
        self.project = project
        self.home = home
        self._bucket: Any = None

    @property
    def bucket(self) -> Any:
        """The warehouse's bucket (eval_assets.warehouse.Bucket), or None on the home's directory."""
        url = self.project.settings.warehouse.url
        if url is not None and self._bucket is None:
            from eval_assets.warehouse import Bucket  # pyarrow only where a bucket is used

            self._bucket = Bucket(url)
        return self._bucket

    def pull(self) -> None:
        """Bring EVAL_HOME/builds up to the bucket's `builds/` (nothing on the home's directory): a
        manifest missing here, or of another size or mtime, is downloaded and written whole (safe_write)."""
        bucket = self.bucket
        if bucket is None:
            return
        self.home.builds.mkdir(parents=True, exist_ok=True)
        for name, (size, mtime) in bucket.listing("builds").items():
            if "/" in name or not name.endswith(".yaml") or id_problem(name[: -len(".yaml")]) is not None:
                continue
            local = self.home.builds / name
            try:
                stat = local.stat()
                if stat.st_size == size and (mtime is None or stat.st_mtime_ns == mtime):
                    continue
            except FileNotFoundError:
                pass
            try:
                data = bucket.get_bytes("builds/" + name)
            except FileNotFoundError:  # removed between the listing and the read
                continue
            write_file(local, data)
            if mtime is not None:
                os.utime(local, ns=(mtime, mtime))

    def _push(self, target: Path) -> None:
        """Upload a manifest just stored here to the bucket; the local copy takes the object's mtime."""
        bucket = self.bucket
        if bucket is None:
            return
        mtime = bucket.put_file(target, "builds/" + target.name)
        if mtime is not None:
            os.utime(target, ns=(mtime, mtime))

    def path(self, build_id: str) -> Path:
        """Where a build's manifest is registered; an id outside the id grammar is refused (TrackError)
        before it can name a path."""
        if (problem := id_problem(build_id)) is not None:
            raise TrackError(f"build id: {problem}")
        return self.home.builds / f"{build_id}.yaml"

    def _manifests(self) -> list[Path]:
        """The registered manifests here, as they are now (no pull)."""
        return [p for p in self.home.builds.glob("*.yaml") if id_problem(p.stem) is None]

    def ids(self) -> list[str]:
        """Registered build ids, sorted."""
        self.pull()
        return sorted(p.stem for p in self._manifests())

    def by_registration(self) -> list[str]:
        """Registered builds, oldest registration first (by when the manifest was stored)."""
        self.pull()
        return [p.stem for p in sorted(self._manifests(), key=lambda p: (p.stat().st_mtime_ns, p.stem))]

    def register(self, path: Path) -> BuildManifest:
        """Validate a manifest and store it under EVAL_HOME/builds (atomic), and in the bucket on object
        storage. Raises ConfigError; TrackError in a scratch home without a bucket (it would be lost)."""
        refused = kept_in_scratch(
            self.home.root, ["the build registry (set warehouse: {url, catalog})"] if self.bucket is None else []
        )
        if refused:
            raise TrackError(refused)
        known = self.ids()
        manifest = load_build(path, self.project, known)
        target = self.path(manifest.id)
        if target.exists():
            existing = load_build(target, self.project, known)
            if existing != manifest:
                raise ConfigError(
                    [
                        Problem(
                            str(path),
                            "id",
                            f"build {manifest.id!r} is already registered with a different manifest",
                        )
                    ]
                )
            if self.bucket is not None and target.name not in self.bucket.listing("builds"):
                self._push(target)  # registered here before the warehouse moved to the bucket
            return manifest
        write_file(target, yaml.safe_dump(manifest.model_dump(mode="json", exclude_none=True), sort_keys=False))
        self._push(target)
        return manifest

    def resolve(self, build_id: str) -> BuildManifest:
        """The registered manifest of `build_id`, read and validated now. Raises TrackError / ConfigError."""
        path = self.path(build_id)  # an id outside the grammar is refused before any read
        self.pull()
        return self._loaded(path)

    def _loaded(self, path: Path) -> BuildManifest:
        """`resolve` of the manifest at `path` over what is here now (the caller pulled)."""
        build_id = path.stem
        if not path.exists():
            raise TrackError(f"unknown build {build_id!r}: register it with `evaltrack build add FILE.yaml`")
        return load_build(path, self.project, sorted(p.stem for p in self._manifests()))

    def loadable(self, warn: Callable[[str], None]) -> list[str]:
        """Registered builds (by id) whose manifest loads and names itself like its file; others are
        skipped with a warning, so one bad file in builds/ never stops the others."""
        valid = []
        for build_id in self.ids():  # one pull for all of them
            try:
                manifest = self._loaded(self.path(build_id))
            except (ConfigError, TrackError) as exc:
                warn(f"skipping build {build_id}: {exc}")
                continue
            if manifest.id != build_id:
                warn(
                    f"skipping build {build_id}: its manifest says id {manifest.id!r}; "
                    "register it with `evaltrack build add`"
                )
                continue
            valid.append(build_id)
        return valid

    def judge_versions(self, build_id: str) -> frozenset[str]:
        """The judge version ids that score a registered build (`judges_for`); none for a build whose
        manifest does not load (nothing is judged on a manifest nobody can read)."""
        try:
            return frozenset(j.version_id for j in judges_for(self.project, self.resolve(build_id)))
        except (ConfigError, TrackError):
            return frozenset()
