"""A small OpenAI-compatible HTTP server for the model gateway's contract tests.

A real server on 127.0.0.1 (a random free port), stdlib only: `ThreadingHTTPServer` serving from a
background thread. It answers `POST /v1/chat/completions` (and `/chat/completions`) from a scripted
queue of behaviours, one per request; when the queue is empty it answers `default` (`ok` unless set).
Every request is recorded (path, headers, JSON body) so a test can check what the client really sent.

    with OpenAIStub() as stub:
        stub.script(Behaviour.status(500), Behaviour.ok("hi"))
        ... call the model at stub.base_url ...
        assert len(stub.requests) == 2

`rate_limit(R)` makes it a rate-limited provider: a token bucket of R requests per second (burst R
unless given) in front of the script; a request beyond it is answered 429 with `Retry-After` (whole
seconds, or an HTTP date) and optionally OpenAI's `retry-after-ms`. `latency_s` delays every `ok`
answer (a provider's think time). `answers` records (monotonic time, status) of every completion
answer, for rates and 429 shares.

`stop()` releases any request still hanging, shuts the server down, closes its socket and joins
every thread it started: no thread or port outlives the test.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

COMPLETION_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
HANG_LIMIT_S = 30.0
"""A hanging request waits at most this long for `stop()` (a backstop; `stop()` releases it at once)."""

Kind = Literal["ok", "status", "hang", "malformed"]
RetryAfterForm = Literal["seconds", "date", "seconds+ms"]


@dataclass(frozen=True)
class Behaviour:
    """How the server answers one request."""

    kind: Kind
    text: str = "stub says hello"
    prompt_tokens: int = 11
    completion_tokens: int = 7
    status_code: int = 200
    message: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    echo_request_headers: bool = False
    echo_key: bool = False

    @classmethod
    def ok(
        cls,
        text: str = "stub says hello",
        *,
        prompt_tokens: int = 11,
        completion_tokens: int = 7,
        echo_key: bool = False,
    ) -> Behaviour:
        """A completion. `echo_key`: the text goes on with the request's Authorization header, value
        included, as a careless provider might answer "what headers did I send?"."""
        return cls(
            "ok", text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, echo_key=echo_key
        )

    @classmethod
    def status(
        cls,
        code: int,
        message: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        echo_request_headers: bool = False,
        echo_key: bool = False,
    ) -> Behaviour:
        """An OpenAI-style error body with HTTP status `code`.

        `echo_request_headers`: the error message repeats every request header, values included, as
        a careless provider or proxy might; a client must not pass that on. `echo_key`: it ends with
        `Received API Key = <the bearer token>`, as some servers answer a key they reject.
        """
        return cls(
            "status",
            status_code=code,
            message=message or f"stub error {code}",
            headers=dict(headers or {}),
            echo_request_headers=echo_request_headers,
            echo_key=echo_key,
        )

    @classmethod
    def rate_limited(cls, retry_after_s: int = 0) -> Behaviour:
        return cls.status(
            429,
            "Rate limit reached for requests",
            headers={"Retry-After": str(retry_after_s), "retry-after-ms": str(retry_after_s * 1000)},
        )

    @classmethod
    def server_error(cls) -> Behaviour:
        return cls.status(500, "The server had an error while processing your request")

    @classmethod
    def hang(cls) -> Behaviour:
        """Never answer (until the server stops): longer than any client timeout in the tests."""
        return cls("hang")

    @classmethod
    def malformed(cls) -> Behaviour:
        """HTTP 200 whose body is not JSON."""
        return cls("malformed")


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # the parsed JSON body, or None when it was not JSON
    raw_body: bytes


class _Server(ThreadingHTTPServer):
    # Non-daemon handler threads: server_close() joins them, so none outlives stop().
    daemon_threads = False
    block_on_close = True
    allow_reuse_address = False
    request_queue_size = 256  # one connection per request: a rate-limit test opens dozens at once


class OpenAIStub:
    """The server; `start()`/`stop()` or use it as a context manager."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.requests: list[RecordedRequest] = []
        self.threads: list[threading.Thread] = []
        self._queue: deque[Behaviour] = deque()
        self.default = Behaviour.ok()
        """The answer when the script is empty (e.g. `Behaviour.server_error()` for a provider that is down)."""
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._completions = 0
        self._stopped_listener: Any = None
        self.latency_s = 0.0
        """Every `ok` answer waits this long first (the provider's think time)."""
        self.answers: list[tuple[float, int]] = []
        """(time.monotonic(), HTTP status) of every completion answer, in the order they were sent."""
        self._bucket: _Bucket | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> OpenAIStub:
        if self._server is not None:
            raise RuntimeError("the stub is already running")
        self._server = _Server((self.host, 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"openai-stub-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release hanging requests, stop serving, close the socket, join every thread. Idempotent."""
        self._release.set()
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopped_listener = server.socket
        try:
            server.shutdown()  # returns once serve_forever has left its loop
        finally:
            server.server_close()  # closes the listening socket; joins the handler threads
            if thread is not None:
                thread.join(timeout=10)
            for t in list(self.threads):
                t.join(timeout=10)
            self._server = None

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port_released(self) -> bool:
        """True once `stop()` has closed the listening socket."""
        return (
            self._server is None
            and self._stopped_listener is not None
            and self._stopped_listener.fileno() == -1
        )

    @property
    def alive_threads(self) -> list[threading.Thread]:
        threads = [*self.threads, *([self._thread] if self._thread is not None else [])]
        return [t for t in threads if t.is_alive()]

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the stub is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI `api_base`: `http://127.0.0.1:<port>/v1`."""
        return f"http://{self.host}:{self.port}/v1"

    # -- scripting ----------------------------------------------------------------------------

    def script(self, *behaviours: Behaviour) -> None:
        """Queue answers for the next completion requests, in order (then `default` when it is empty)."""
        with self._lock:
            self._queue.extend(behaviours)

    def rate_limit(
        self, per_s: float | None, *, burst: float | None = None, retry_after: RetryAfterForm = "seconds"
    ) -> None:
        """Admit `per_s` completion requests per second (a token bucket holding up to `burst`, default
        one second's worth); answer the rest 429 with the wait until the next token: `Retry-After` in
        whole seconds (rounded up) or as an HTTP date, plus `retry-after-ms` with "seconds+ms".
        None lifts the limit."""
        with self._lock:
            if per_s is None:
                self._bucket = None
                return
            size = per_s if burst is None else burst
            self._bucket = _Bucket(per_s, size, size, time.monotonic(), retry_after)

    @property
    def rate_limited_count(self) -> int:
        with self._lock:
            return sum(1 for _, status in self.answers if status == 429)

    @property
    def completion_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path in COMPLETION_PATHS]

    def _next(self, request: RecordedRequest) -> Behaviour | None:
        with self._lock:
            self.requests.append(request)
            self.threads.append(threading.current_thread())
            if request.path not in COMPLETION_PATHS:
                return None
            self._completions += 1
            if self._bucket is not None and (limited := self._bucket.take(time.monotonic())) is not None:
                return limited
            return self._queue.popleft() if self._queue else self.default

    def _answered(self, status: int) -> None:
        with self._lock:
            self.answers.append((time.monotonic(), status))

    def _completion_id(self) -> str:
        with self._lock:
            return f"chatcmpl-stub-{self._completions}"


def _handler_for(stub: OpenAIStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so no idle keep-alive connection pins a handler thread.
        protocol_version = "HTTP/1.0"
        timeout = 10  # a client that connects and sends nothing cannot hold a thread for long

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return  # silent: tests capture output

        def do_GET(self) -> None:  # noqa: N802
            stub._next(self._record(b""))
            self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            request = self._record(raw)
            behaviour = stub._next(request)
            try:
                self._answer(behaviour, request)
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                pass  # the client gave up (a timeout test): nothing to answer

        def _record(self, raw: bytes) -> RecordedRequest:
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            return RecordedRequest(
                method=self.command,
                path=self.path.split("?", 1)[0],
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                raw_body=raw,
            )

        def _answer(self, behaviour: Behaviour | None, request: RecordedRequest) -> None:
            if behaviour is None:
                self._json(
                    404, {"error": {"message": f"no route {request.path}", "type": "invalid_request_error"}}
                )
            elif behaviour.kind == "ok":
                if stub.latency_s > 0:
                    stub._release.wait(stub.latency_s)  # think time (cut short only by stop())
                model = (request.body or {}).get("model", "local-test")
                if behaviour.echo_key:
                    auth = request.headers.get("authorization", "")
                    behaviour = replace(behaviour, text=f"{behaviour.text} (your headers: Authorization: {auth})")
                self._json(200, _completion(stub._completion_id(), model, behaviour))
            elif behaviour.kind == "status":
                message = behaviour.message
                if behaviour.echo_request_headers:
                    message += " (request headers: " + json.dumps(request.headers) + ")"
                if behaviour.echo_key:
                    key = request.headers.get("authorization", "").removeprefix("Bearer ")
                    message += f" Received API Key = {key}"
                error = {
                    "message": message,
                    "type": "stub_error",
                    "param": None,
                    "code": str(behaviour.status_code),
                }
                self._json(behaviour.status_code, {"error": error}, behaviour.headers)
            elif behaviour.kind == "hang":
                stub._release.wait(HANG_LIMIT_S)
                self._json(200, _completion(stub._completion_id(), "late", Behaviour.ok("too late")))
            elif behaviour.kind == "malformed":
                self._send(200, b'{"id": "chatcmpl-broken", "choices": [{"message": ', "application/json")
            else:  # pragma: no cover - Kind is closed
                raise AssertionError(behaviour.kind)

        def _json(self, code: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
            if self.path.split("?", 1)[0] in COMPLETION_PATHS:
                stub._answered(code)
            self._send(code, json.dumps(payload).encode(), "application/json", headers)

        def _send(
            self, code: int, body: bytes, content_type: str, headers: Mapping[str, str] | None = None
        ) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()

    return Handler


@dataclass
class _Bucket:
    """A token bucket: `rate` tokens a second, holding at most `size`."""

    rate: float
    size: float
    tokens: float
    at: float
    form: RetryAfterForm

    def take(self, now: float) -> Behaviour | None:
        """None when a token was taken; else the 429 answer carrying the wait until the next token."""
        self.tokens = min(self.size, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return None
        wait = (1.0 - self.tokens) / self.rate
        whole = max(1, math.ceil(wait))
        if self.form == "date":
            headers = {"Retry-After": formatdate(time.time() + whole, usegmt=True)}
        else:
            headers = {"Retry-After": str(whole)}
            if self.form == "seconds+ms":
                headers["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
        return Behaviour.status(429, "Rate limit reached for requests", headers=headers)


def _completion(completion_id: str, model: str, behaviour: Behaviour) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": 1_764_460_800,
        "model": model,
        "system_fingerprint": "fp_stub",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": behaviour.text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": behaviour.prompt_tokens,
            "completion_tokens": behaviour.completion_tokens,
            "total_tokens": behaviour.prompt_tokens + behaviour.completion_tokens,
        },
    }
