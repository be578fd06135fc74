"""Where the agent endpoint is served: an event loop on a thread of its own, so that a busy engine
loop (model calls, judges, a burst of attempt starts) never delays accepting a connection or reading
a request; each call is handed to the engine's loop, which makes it through the spend path.

An attempt whose client could not connect to the endpoint failed for the track's reason, not the
agent's: `agent_protocol.endpoint_failure` recognises it from the exception the agent raised.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class EndpointHost:
    """An aiohttp application on 127.0.0.1 (a free port), served from a daemon thread's event loop."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: Any = None
        self.base_url = ""

    async def start(self, make_app: Callable[[], Any]) -> str:
        """Start serving `make_app()` (built in the server's loop); returns `http://127.0.0.1:PORT/v1`."""
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(
            target=_serve, args=(loop, ready), daemon=True, name="evaltrack-agent-endpoint"
        )
        self._thread.start()
        await asyncio.to_thread(ready.wait)
        self._loop = loop
        port = await self.on_server(self._listen(make_app))
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self.base_url

    async def _listen(self, make_app: Callable[[], Any]) -> int:
        from aiohttp import web  # litellm's own HTTP stack; only agent runs start a server

        self._runner = web.AppRunner(make_app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    async def stop(self) -> None:
        """Stop serving and end the server's thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self._runner is not None:
            await self.on_server(self._runner.cleanup())
            self._runner = None
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join)
        loop.close()
        self._loop = self._thread = None

    async def on_server(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the server's loop and await it from the caller's loop."""
        assert self._loop is not None
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))


def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    loop.run_forever()


def on_loop(
    loop: asyncio.AbstractEventLoop, call: Callable[..., Awaitable[T]]
) -> Callable[..., Awaitable[T]]:
    """`call`, made on `loop` (the engine's) whichever loop awaits it (the server's)."""

    async def made_there(*args: Any) -> T:
        async def run() -> T:
            return await call(*args)

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), loop))

    return made_there
