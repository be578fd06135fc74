"""Every core: a run's attempts in blocks of whole scenarios, run by the calling process or by worker
processes, handed out as each one asks for more, and given back in block order.

A block is consecutive scenarios in id order (about `BLOCK_ATTEMPTS` attempts; a scenario is never
split, so the whole-scenario exclusion of a stopped scenario sees all its repeats together). The
calling process runs blocks itself on `lanes` coroutines of its own engine (its event loop), if it
has lanes (the track gives it none when the run has worker processes: then it calls no model and
never imports litellm); each worker process is forked from a fork server (a clean process that
imported `open_runner`'s module and the `preload` modules once, litellm among them, and that the
track may have started ahead, `start_fork_server`; Dagster's threads and a running event loop do not
survive a fork of the caller), opens the run's engine (project, home, journal, run id) with
`open_runner`, says it is ready, and is then handed two blocks at a time (the next waits in its
pipe). A worker that is still starting when the blocks run out is stopped. Every
process runs the SAME engine call on a block, against the same spend journal (its reservations are
atomic across processes, so the ceilings hold). Blocks come back in block order, whoever ran them,
so the rows are the same whatever the worker count; at most `ahead` blocks past the oldest
unfinished one are started, so memory is bounded by blocks, not by the run.

The run's deadline is handed over as an absolute point on the host's monotonic clock (shared by the
processes of one host), so a worker that took a while to start does not get longer.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import queue
import threading
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from eval_assets.capability.errors import TrackError
from eval_assets.config import Project, Scenario

if TYPE_CHECKING:  # the engine is imported by what runs a block, not by the block's shape
    from eval_assets.engine import StoredAttempt

T = TypeVar("T")
P = TypeVar("P")
R = TypeVar("R")

BLOCK_ATTEMPTS = 200
"""About how many attempts a block holds: enough that handing one to a worker (pickling it) costs little
beside its calls, few enough that the work spreads evenly."""


@dataclass(frozen=True)
class WorkerSetup:
    """What a worker process needs to open the run's track; plain, picklable values only."""

    project: Project
    home: Path
    journal_url: str
    run_id: str
    build_id: str
    judge_version: str | None  # None: the subject attempts (scenario_runs)
    generation: int
    processes: int  # the processes running blocks: each takes this share of the per-model limits
    deadline_at: float  # the run's deadline on time.monotonic() (one clock per host)
    judge_ahead: tuple[
        str, ...
    ] = ()  # subject runs: the judge versions that judge ahead (engine.judge_ahead)
    trace_context: tuple[
        tuple[str, str], ...
    ] = ()  # the run's span (tracing.carrier): workers' spans join it


@dataclass(frozen=True)
class Block:
    """Consecutive scenarios (by id) and, for a judge run, the stored attempts of those scenarios."""

    index: int
    scenario_ids: tuple[str, ...]
    attempts: tuple[StoredAttempt, ...] = ()


@dataclass
class Counters:
    """A process's engine counters: tries reused from the journal, whether the deadline passed, judge
    calls made ahead; and the blocks it ran (counted by the block run, not the engine)."""

    reused: int = 0
    deadline_passed: bool = False
    judged_ahead: int = 0
    blocks: int = 0


class Runner(Generic[R]):
    """A worker process's open track and engine: runs one block at a time in its own event loop."""

    def run(self, block: Block) -> list[R]:
        raise NotImplementedError

    def counters(self) -> Counters:
        raise NotImplementedError


def blocks_of(scenarios: Sequence[Scenario], size: int = BLOCK_ATTEMPTS) -> list[tuple[str, ...]]:
    """Scenario ids in id order, cut into blocks of about `size` attempts (a scenario is never split)."""
    out: list[tuple[str, ...]] = []
    block: list[str] = []
    attempts = 0
    for scenario in sorted(scenarios, key=lambda s: s.id):
        block.append(scenario.id)
        attempts += scenario.repeats
        if attempts >= size:
            out.append(tuple(block))
            block, attempts = [], 0
    if block:
        out.append(tuple(block))
    return out


def drive(stream: AsyncIterator[T]) -> Iterator[T]:
    """Iterate an async iterator from synchronous code, on a private event loop that lives while the
    iteration does (its tasks run whenever the next item is asked for); cleaned up like asyncio.run."""
    loop = asyncio.new_event_loop()
    try:
        while True:
            try:
                item = loop.run_until_complete(stream.__anext__())
            except StopAsyncIteration:
                return
            yield item
    finally:
        try:
            closing = getattr(stream, "aclose", None)
            if closing is not None:
                loop.run_until_complete(closing())
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()


@dataclass
class _Worker:
    process: Any  # multiprocessing's Process of the forkserver context
    conn: Connection
    number: int
    ready: bool = False
    in_flight: int = 0  # blocks handed to it and not yet back
    ran: int = 0  # blocks it gave back
    counters: Counters = field(default_factory=Counters)
    outbox: queue.SimpleQueue[Block | None] = field(default_factory=queue.SimpleQueue)

    def start_sending(self) -> None:
        """Blocks go to the worker from a thread of their own: a send waits while the pipe is full
        (a judge block carries its attempts' outputs), never the calling process's event loop."""
        threading.Thread(
            target=self._send_all, daemon=True, name=f"evaltrack-worker-{self.number}-send"
        ).start()

    def _send_all(self) -> None:
        while True:
            block = self.outbox.get()
            try:
                self.conn.send(block)
            except OSError:  # the worker is gone: its reader reports it
                return
            if block is None:
                return


class BlockRun(Generic[R]):
    """One run's blocks: `lanes` coroutines of the calling process run `local` on its own engine, and
    `workers` worker processes (`open_runner(setup)` in each) run blocks as they ask for them.

    `results()` gives each block's results in block order; once it is exhausted, `counters` holds the
    calling process's counters (`local_counters()`) first, then each worker's.
    """

    def __init__(
        self,
        blocks: Sequence[Block],
        local: Callable[[Block], Awaitable[list[R]]],
        local_counters: Callable[[], Counters],
        *,
        workers: int = 0,
        setup: WorkerSetup | None = None,
        open_runner: Callable[[WorkerSetup], Runner[R]] | None = None,
        lanes: int = 2,
        ahead: int = 8,
        log: Callable[[str], None] | None = None,
        preload: Sequence[str] = (),
    ):
        if lanes < 1 and workers < 1:
            raise ValueError("a block run needs a lane or a worker process")
        if workers > 0 and (setup is None or open_runner is None):
            raise ValueError("worker processes need the run's setup and a runner to open")
        self.blocks, self.local, self.local_counters = blocks, local, local_counters
        self.workers, self.setup, self.open_runner = workers, setup, open_runner
        self.lanes, self.ahead, self.log = lanes, ahead, log
        self.preload = tuple(preload)  # what the fork server imports besides the runner's module
        self.counters: list[Counters] = []

    async def _start_workers(self, pool: list[_Worker], on_message: Callable[[_Worker], None]) -> None:
        """Start the worker processes, each in a thread (the first start waits for the fork server to
        import the track, unless it was started ahead), adding each to `pool`."""
        setup, open_runner = self.setup, self.open_runner
        assert setup is not None and open_runner is not None
        loop = asyncio.get_running_loop()
        # the fork server imports the runner's module (the engine) and the preloads (litellm) once; each
        # worker is forked from it, a clean single-threaded process, never from the caller (its
        # threads, its event loop)
        context = fork_server(fork_server_imports(open_runner, self.preload))
        for number in range(1, self.workers + 1):
            ours, theirs = context.Pipe()
            process = context.Process(
                target=worker_main,
                args=(theirs, open_runner, setup),
                daemon=True,
                name=f"evaltrack-worker-{number}",
            )

            started: asyncio.Future[None] = loop.create_future()

            def start(process: Any = process, theirs: Connection = theirs, started: Any = started) -> None:
                failure: BaseException | None = None
                try:
                    process.start()
                    theirs.close()
                except BaseException as exc:  # noqa: BLE001 (raised in the run, by the coordinator)
                    failure = exc
                try:
                    loop.call_soon_threadsafe(_settle, started, failure)
                except (
                    RuntimeError
                ):  # the run ended first (its loop closed); the worker finds its pipe closed
                    pass

            # a thread of its own, not the loop's executor: a run that ends first does not wait for it
            threading.Thread(target=start, daemon=True, name=f"evaltrack-worker-{number}-start").start()
            try:
                await started
            except asyncio.CancelledError:
                ours.close()  # the run is over: the worker, once started, reads the end of its pipe and exits
                raise
            worker = _Worker(process, ours, number)
            worker.start_sending()
            pool.append(worker)
            loop.add_reader(ours.fileno(), on_message, worker)
        if self.log is not None:
            meanwhile = "; the calling process ran blocks meanwhile" if self.lanes else ""
            self.log(f"{self.workers} worker processes started{meanwhile}")

    async def results(self) -> AsyncIterator[list[R]]:
        """Raises the first error of any block (a worker's error as its own exception type when it
        pickles, else as a TrackError naming the worker); a worker that dies is a TrackError. Workers
        are stopped on the way out, whatever happened."""
        blocks, lanes, ahead, log = self.blocks, self.lanes, self.ahead, self.log
        local = self.local
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[tuple[str, Any, Any]] = asyncio.Queue()
        done: dict[int, list[R]] = {}
        next_block = 0  # the next block to hand out
        next_out = 0  # the next block to give back
        running_local = 0
        pool: list[_Worker] = []
        local_blocks = 0
        starting: asyncio.Future[None] | None = None

        def take() -> Block | None:
            nonlocal next_block
            if next_block >= len(blocks) or next_block - next_out >= ahead:
                return None
            next_block += 1
            return blocks[next_block - 1]

        async def lane(block: Block) -> None:
            try:
                events.put_nowait(("local", block.index, await local(block)))
            except BaseException as exc:  # noqa: BLE001 (handed to the coordinator, which raises it)
                events.put_nowait(("local-error", block.index, exc))

        def on_message(worker: _Worker) -> None:
            try:
                message = worker.conn.recv()
            except (EOFError, OSError):
                loop.remove_reader(worker.conn.fileno())
                events.put_nowait(("died", worker, None))
                return
            events.put_nowait((message[0], worker, message[1:]))

        def assign() -> None:
            nonlocal running_local, local_blocks
            for worker in pool:
                # two blocks each: the next one waits in its pipe while it runs the first, so it never
                # waits for this loop (busy with its own blocks, or with the partition writer)
                while worker.ready and worker.in_flight < 2 and (block := take()) is not None:
                    worker.in_flight += 1
                    worker.outbox.put(block)
            while running_local < lanes and (block := take()) is not None:
                running_local += 1
                local_blocks += 1
                asyncio.ensure_future(lane(block))

        tasks_before = asyncio.all_tasks(loop)
        try:
            if self.workers > 0 and blocks:
                starting = asyncio.ensure_future(self._start_workers(pool, on_message))

                def start_failed(future: asyncio.Future[None]) -> None:
                    if not future.cancelled() and future.exception() is not None:
                        events.put_nowait(("start-failed", None, future.exception()))

                starting.add_done_callback(start_failed)
            assign()
            while next_out < len(blocks):
                kind, who, payload = await events.get()
                if kind == "local":
                    running_local -= 1
                    done[who] = payload
                elif kind in ("local-error", "start-failed"):
                    raise payload
                elif kind == "ready":
                    who.ready = True
                    if log is not None:
                        log(f"worker process {who.number} ready")
                elif kind == "done":
                    index, results, counters = payload
                    done[index] = results
                    who.in_flight -= 1
                    who.ran += 1
                    who.counters = counters
                elif kind == "error":
                    exc, text = payload
                    if isinstance(exc, BaseException):
                        raise exc
                    raise TrackError(f"worker process {who.number} failed: {text}")
                elif kind == "died":
                    await asyncio.to_thread(who.process.join, 5)  # reaped, for its exit code
                    raise TrackError(
                        f"worker process {who.number} died (exit code {who.process.exitcode}); what it settled "
                        "stays in the journal and the next run reuses it"
                    )
                while next_out in done:
                    results = done.pop(next_out)
                    next_out += 1
                    yield results
                assign()
        finally:
            if starting is not None:
                starting.cancel()  # a worker it is still starting finds its pipe closed, and exits
            for worker in pool:
                try:
                    loop.remove_reader(worker.conn.fileno())
                except (ValueError, OSError):
                    pass
                if worker.ready and worker.in_flight == 0 and worker.process.is_alive():
                    worker.outbox.put(None)  # done: it exits
                else:  # still starting, or stopped mid-block by an error elsewhere
                    worker.process.terminate()
                    worker.outbox.put(None)  # its sender thread ends too
            for worker in pool:
                await asyncio.to_thread(worker.process.join, 30)
                if worker.process.is_alive():
                    worker.process.kill()
                    await asyncio.to_thread(worker.process.join, 5)
                worker.conn.close()
            for task in asyncio.all_tasks(loop) - tasks_before - {asyncio.current_task()}:
                task.cancel()
            if log is not None and pool:
                shares = ", ".join(f"worker {w.number}: {w.ran}" for w in pool)
                log(f"blocks run: calling process {local_blocks}, {shares}")
        self.counters = [
            replace(self.local_counters(), blocks=local_blocks),
            *(replace(w.counters, blocks=w.ran) for w in pool),
        ]


_COLLECTOR_OFF = "eval_assets.capability._collector_off"


def fork_server_imports(
    open_runner: Callable[[WorkerSetup], Runner[Any]], preload: Sequence[str]
) -> list[str]:
    """What a block run's fork server imports: `_collector_off` (the server's collector off while it
    imports), the runner's module, then `preload` (each once)."""
    return list(dict.fromkeys([_COLLECTOR_OFF, open_runner.__module__, *preload]))


def fork_server(imports: Sequence[str]) -> Any:
    """multiprocessing's forkserver context, its server (one per calling process, started by the first
    worker start or by `start_fork_server`) importing `imports` once when it starts."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(imports))
    return context


def start_fork_server(imports: Sequence[str]) -> None:
    """Start the fork server now, unless it runs: it imports `imports` in its own process, on another
    core, while the caller goes on (this returns at once); a later block run forks its workers from it
    without waiting for that import."""
    from multiprocessing import forkserver

    fork_server(imports)
    forkserver.ensure_running()


def _settle(future: asyncio.Future[None], exc: BaseException | None) -> None:
    if future.done():  # cancelled: the run ended first
        return
    if exc is None:
        future.set_result(None)
    else:
        future.set_exception(exc)


def worker_main(
    conn: Connection, open_runner: Callable[[WorkerSetup], Runner[Any]], setup: WorkerSetup
) -> None:
    """A worker process: open the run's track, say ready, then run each block it is handed until told
    to stop (None) or its caller goes away."""
    try:
        runner = open_runner(setup)
    except BaseException as exc:  # noqa: BLE001 (reported to the caller, which fails the run)
        _send_error(conn, exc)
        return
    if multiprocessing.parent_process() is not None:  # a worker process, not a caller's thread
        # what the worker holds for its whole life (the fork server's imports, litellm among them, and
        # the opened track) never becomes garbage: frozen out of the collector's way, each full
        # collection scans only what the blocks make, not litellm's heap; the collector, off in the
        # fork server (`_collector_off`), back on
        gc.freeze()
        gc.enable()
    try:
        conn.send(("ready",))
    except OSError:  # the run ended while this worker started
        return
    while True:
        try:
            block = conn.recv()
        except (EOFError, OSError):
            return
        if block is None:
            return
        try:
            results = runner.run(block)
            counters = runner.counters()
        except BaseException as exc:  # noqa: BLE001
            _send_error(conn, exc)
            return
        conn.send(("done", block.index, results, counters))


def _send_error(conn: Connection, exc: BaseException) -> None:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    try:
        conn.send(("error", exc, text))
    except Exception:  # noqa: BLE001 (the exception does not pickle: its text still tells)
        conn.send(("error", None, text))
