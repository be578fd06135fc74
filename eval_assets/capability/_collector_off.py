"""Imported first by a block run's fork server (`_shards.fork_server_imports`), for its side effect: the
server's cyclic garbage collector is turned off. The server only imports (the engine, litellm) and then
forks; its imports make long-lived objects and no garbage worth a collection, and collecting during
them would be a large share of their CPU, on the path of the first block. Each worker forked from it
freezes what it inherited and turns the collector back on before its first block (`_shards.worker_main`).
No other process imports this module."""

import gc

gc.disable()
