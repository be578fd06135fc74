"""An S3-compatible server on 127.0.0.1 (moto's server mode) for the object-store warehouse tests and
benchmark: `S3Server` starts it on a free port and creates buckets; the AWS variables it needs (dummy
credentials, the endpoint) are returned by `environment()`, for a test's monkeypatch or a child's env.
No pytest import: plain helper code."""

from __future__ import annotations

import uuid
from typing import Any


class S3Server:
    """moto's S3 server in a thread of this process, listening on 127.0.0.1 only; `stop()` it."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._server: Any = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""

    def start(self) -> S3Server:
        self._server.start()
        host, port = self._server.get_host_and_port()
        assert host == "127.0.0.1", host
        self.endpoint = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.stop()

    def environment(self) -> dict[str, str]:
        """The AWS variables a client of this server reads (test-only credentials, never real ones)."""
        return {
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def create_bucket(self, name: str) -> str:
        """A new bucket; returns its s3:// URL."""
        from pyarrow import fs as pafs

        host = self.endpoint.split("://", 1)[1]
        s3 = pafs.S3FileSystem(
            endpoint_override=host,
            scheme="http",
            region="us-east-1",
            access_key="testing",
            secret_key="testing",
            allow_bucket_creation=True,
        )
        s3.create_dir(name)
        return f"s3://{name}"


class ObjectBackend:
    """A started S3 server and PostgreSQL cluster for one test module: `warehouse(root)` is a fresh
    ObjectWarehouse on its own bucket prefix and database; `stop()` stops both."""

    def __init__(self) -> None:
        from pg import PostgresCluster

        self.s3 = S3Server().start()
        self.pg = PostgresCluster()
        try:
            self.pg.start()
        except BaseException:
            self.s3.stop()
            raise
        # moto keeps its buckets per process, across servers: a bucket of this backend's own
        self.bucket = self.s3.create_bucket(f"evaltrack-test-{uuid.uuid4().hex[:12]}")
        self._count = 0

    def new_location(self) -> tuple[str, str]:
        """(bucket url with a prefix of its own, a new empty catalog database)."""
        self._count += 1
        return f"{self.bucket}/wh{self._count}", self.pg.create_database()

    def stop(self) -> None:
        try:
            self.pg.stop()
        finally:
            self.s3.stop()


class Objects:
    """A test's hands on the files of a warehouse, whichever kind: read, overwrite, delete, drop a
    stranger beside them, and list what was set aside (the perturbations of the integrity tests)."""

    def __init__(self, warehouse: Any):
        self.wh = warehouse
        self.bucket = getattr(warehouse, "bucket", None)

    def read(self, rel: str) -> bytes:
        if self.bucket is None:
            return (self.wh.data / rel).read_bytes()
        with self.bucket.fs.open_input_stream(self.bucket.path("data/" + rel)) as f:
            return bytes(f.read())

    def write(self, rel: str, data: bytes) -> None:
        """Overwrite (or create) `rel` with `data`; a local file keeps its mtime when it existed."""
        if self.bucket is None:
            import os

            path = self.wh.data / rel
            stat = path.stat() if path.exists() else None
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            if stat is not None:
                os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
            return
        self.bucket.put_bytes("data/" + rel, data)

    def delete(self, rel: str) -> None:
        if self.bucket is None:
            (self.wh.data / rel).unlink()
        else:
            self.bucket.fs.delete_file(self.bucket.path("data/" + rel))

    def exists(self, rel: str) -> bool:
        if self.bucket is None:
            return bool((self.wh.data / rel).exists())
        try:
            self.bucket.stat("data/" + rel)
            return True
        except FileNotFoundError:
            return False

    def quarantined(self) -> list[str]:
        """Every file set aside (notes excluded), relative to the data root it came from."""
        if self.bucket is None:
            root = self.wh.quarantine
            return sorted(
                "/".join(p.relative_to(root).parts[1:])
                for p in root.rglob("*.parquet")
                if p.relative_to(root).parts[0] != "notes"
            )
        return sorted(
            k.split("/", 1)[1] for k in self.bucket.listing("quarantine") if not k.startswith("notes/")
        )

    def notes(self) -> list[dict[str, Any]]:
        import json

        if self.bucket is None:
            return [json.loads(p.read_text()) for p in sorted((self.wh.quarantine / "notes").glob("*.json"))]
        out = []
        for key in sorted(self.bucket.listing("quarantine")):
            if key.startswith("notes/"):
                with self.bucket.fs.open_input_stream(self.bucket.path("quarantine/" + key)) as f:
                    out.append(json.loads(bytes(f.read())))
        return out


def comparable_rows(warehouse: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's current rows (`DATASETS`), sorted, without the columns two equal runs differ in
    (`run_varying`): what the local directory and a bucket must share."""
    import json

    from eval_assets.warehouse import DATASETS, run_varying

    out = {}
    for table in DATASETS:
        columns = [
            r["column_name"]
            for r in warehouse.rows(f"DESCRIBE {table}")
            if not run_varying(str(r["column_name"]), str(r["column_type"]))
        ]
        quoted = ", ".join('"' + c + '"' for c in columns)
        rows = [tuple(r.values()) for r in warehouse.rows(f"SELECT {quoted} FROM {table}")]
        out[table] = sorted(rows, key=lambda row: json.dumps(list(row), default=str))
    return out
