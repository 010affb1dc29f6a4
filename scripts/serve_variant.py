#!/usr/bin/env python3
"""``python -m pyllama_yield serve`` with one change switched by the environment, for A/B runs of
``scripts/bench_serving.py --ours "python scripts/serve_variant.py serve"`` (results under
``benchmarks/ab/``):

- ``AB_METRICS=queue``: ``/metrics`` and ``/slots`` asked of the queue's worker (a METRICS task,
  the way before it was read from the published snapshot on the event loop);
- ``AB_SWITCH=S``: ``sys.setswitchinterval(S)`` (Python's default is 0.005);
- ``AB_INLINE=1``: requests tokenized and rendered on the event loop, no bridge thread hop;
- ``AB_LOOP=asyncio|uvloop``: uvicorn's event loop;
- ``AB_HTTP=h11|httptools``: uvicorn's HTTP protocol;
- ``AB_POLL=N``: the ggml thread pools' polling level (0-100; llama-server's ``--poll``, 50 by
  default): how long its threads spin for the next graph before they sleep. Only in a build of
  ggml without OpenMP: with it (the default on Linux) the pools' threads are libgomp's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if os.environ.get("AB_SWITCH"):
    sys.setswitchinterval(float(os.environ["AB_SWITCH"]))
if os.environ.get("AB_METRICS") == "queue":
    from pyllama_yield.api import native
    from pyllama_yield.queue import TaskType

    async def _metrics(state: Any, scrape: bool = False) -> Any:
        res = await state.bridge.try_call(TaskType.METRICS, scrape, lambda: state.engine.is_sleeping)
        return res.payload.values if res is not None else state.engine.snapshot(reset_buckets=scrape)

    native.current_metrics = _metrics
if os.environ.get("AB_POLL"):
    from pyllama_yield.llama import context as llama_context

    _attach = llama_context._attach_threadpools

    def _attach_with_poll(ctx: Any, n_threads: int, n_threads_batch: int, poll: int) -> tuple[Any, ...]:
        return _attach(ctx, n_threads, n_threads_batch, int(os.environ["AB_POLL"]))

    llama_context._attach_threadpools = _attach_with_poll
if os.environ.get("AB_INLINE"):
    from pyllama_yield.api import bridge

    async def _run(self: Any, fn: Any, *args: Any) -> Any:
        return fn(*args)

    bridge.Bridge.run = _run  # type: ignore[method-assign]
if os.environ.get("AB_LOOP") or os.environ.get("AB_HTTP"):
    import uvicorn

    _init = uvicorn.Config.__init__

    def _config(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["loop"] = os.environ.get("AB_LOOP", "asyncio")
        kwargs["http"] = os.environ.get("AB_HTTP", kwargs.get("http", "h11"))
        _init(self, *args, **kwargs)

    uvicorn.Config.__init__ = _config  # type: ignore[method-assign]

from pyllama_yield.__main__ import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
