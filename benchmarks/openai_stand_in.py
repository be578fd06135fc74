"""An OpenAI-compatible chat-completions stand-in on 127.0.0.1 for `inspect_side_by_side.py`: the HTTP
path a real model API costs a client (connection pool, request and response JSON, the SDK's parsing),
with answers shaped like the sim provider's and zero latency.

It answers `POST /v1/chat/completions` (and `/chat/completions`) by what the prompt asks for:

- a grader's prompt (Inspect's `model_graded_qa` asks for `GRADE: C|P|I`): reads the sim quality
  marker out of the prompt, as `SimJudge` reads the subject's output, and answers `GRADE: C` at
  quality >= 0.5, else `GRADE: I`;
- anything else is a subject's call: `Answer ... [sim-quality=0.xxxx]` (the sim subject's shape, the
  quality a deterministic draw from the request's position and text).

Usage (by the benchmark): `python benchmarks/openai_stand_in.py PORT_FILE`: binds a free port on
127.0.0.1, writes it to PORT_FILE (after the socket listens), serves until SIGTERM/SIGINT. It counts
the completions it answered (`GET /requests` tells the count) and prints the count on stdout when
stopped. aiohttp (a dependency of
litellm, so in the project's venv) keeps its own CPU low; that CPU is neither side's cost and the
benchmark reports it separately.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

from aiohttp import web

QUALITY_MARKER = "[sim-quality="  # eval_assets.providers.simmodel.QUALITY_MARKER, without the import
_QUALITY_RE = re.compile(re.escape(QUALITY_MARKER) + r"([0-9]*\.?[0-9]+)\]")
_GRADE_ASK_RE = re.compile(r"GRADE: \$LETTER")  # model_graded_qa's default instructions
COMPLETION_PATHS = ("/v1/chat/completions", "/chat/completions")


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def answer_for(messages: list[dict[str, Any]], count: int) -> str:
    """The reply's text: a grade for a grader's prompt, else a subject's answer with a quality marker."""
    text = "\n".join(str(m.get("content") or "") for m in messages if isinstance(m, dict))
    if _GRADE_ASK_RE.search(text):
        marker = _QUALITY_RE.search(text)
        quality = float(marker.group(1)) if marker else 0.0
        grade = "C" if quality >= 0.5 else "I"
        return f"The submission was compared with the criterion.\n\nGRADE: {grade}"
    draw = hashlib.sha256(f"{count}:{text}".encode()).digest()
    quality = min(1.0, max(0.0, 0.75 + (int.from_bytes(draw[:4], "big") / 2**32 - 0.5) * 0.24))
    return f"Answer to the request (call {count}) from the stand-in. {QUALITY_MARKER}{quality:.4f}]"


class StandIn:
    def __init__(self) -> None:
        self.count = 0

    async def requests(self, request: web.Request) -> web.Response:
        """How many completions it has answered (the benchmark checks each run's share)."""
        return web.json_response({"requests": self.count})

    async def complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.count += 1
        messages = body.get("messages") or []
        content = answer_for(messages, self.count)
        prompt = sum(_tokens(str(m.get("content") or "")) for m in messages if isinstance(m, dict))
        completion = _tokens(content)
        return web.json_response(
            {
                "id": f"chatcmpl-stand-in-{self.count}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": str(body.get("model", "stand-in")),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                        "logprobs": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            }
        )


async def serve(port_file: Path) -> int:
    stand_in = StandIn()
    app = web.Application(client_max_size=64 * 1024 * 1024)
    for path in COMPLETION_PATHS:
        app.router.add_post(path, stand_in.complete)
    app.router.add_get("/requests", stand_in.requests)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    port = runner.addresses[0][1]
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(port))
    tmp.replace(port_file)  # the reader sees the port only once the socket listens
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()
    return stand_in.count


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: openai_stand_in.py PORT_FILE")
    count = asyncio.run(serve(Path(sys.argv[1])))
    print(json.dumps({"requests": count}), flush=True)


if __name__ == "__main__":
    main()
