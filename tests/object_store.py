"""An S3-compatible server on 127.0.0.1 (moto's server mode) for the object-store warehouse tests and
benchmark: `S3Server` starts it on a free port and creates buckets; the AWS variables it needs (dummy
credentials, the endpoint) are returned by `environment()`, for a test's monkeypatch or a child's env.
No pytest import: plain helper code."""

from __future__ import annotations

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
