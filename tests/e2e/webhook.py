"""A webhook receiver on 127.0.0.1 for tests: it records the JSON bodies POSTed to it."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Hook(BaseHTTPRequestHandler):
    posts: list[dict[str, Any]]

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.posts.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@contextlib.contextmanager
def webhook(path: str = "/hook") -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(its URL, the JSON bodies POSTed to it); the server is stopped and joined on exit."""
    posts: list[dict[str, Any]] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Hook", (_Hook,), {"posts": posts}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}", posts
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
