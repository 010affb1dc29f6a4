#!/usr/bin/env python3
"""Where a request's way to its first token goes in ``serve``: a timeline of milestones on the
event loop and the loop thread (one clock), for one client sending streamed requests of
``--n-predict`` tokens with distinct prompts, on a model at GPU speed (2×64). llama-server is
measured beside it from the client's side only (its time to first token), the servers taking turns.

Ours runs with timestamps at a few functions (this script, ``--traced``, wraps them and runs
``serve`` in-process): each request's milestones are taken in order after its arrival, and each
step's median over the requests (the first fifth dropped as warm-up) is reported. The wrappers
cost a few microseconds each, so the timeline runs a little slower than the untraced server.
Writes ``benchmarks/trace_first_token.json`` (``--out``).

    scripts/trace_first_token.py --llama-server build/llama-server/bin/llama-server
"""

from __future__ import annotations

import argparse
import atexit
import functools
import inspect
import json
import os
import runpy
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from _bench import bench_model, git_commit, write_json  # noqa: E402
from bench_host_cost import MODELS  # noqa: E402
from bench_serving import fresh_server, stop_server  # noqa: E402

# (milestone, the function whose call marks it, whether its start or its end): in request order
MILESTONES = [
    ("arrived", "recv", "start"),
    ("request read and routed: its tasks begin", "make_tasks", "start"),
    ("settings validated and resolved (or a kept copy)", "tokenize", "start"),
    ("prompt tokenized", "tokenize", "end"),
    ("tasks built", "make_tasks", "end"),
    ("posting called", "submit", "start"),
    ("tasks posted to the queue", "submit", "end"),
    ("loop thread took the task", "on_task", "start"),
    ("slot chosen", "choose_slot", "end"),
    # every request here updates the prompt cache (one slot, distinct prompts keep little of it); a request
    # that misses a milestone leaves the timeline, which requests_traced would show
    ("prompt cache updated (the slot's old prompt saved, a better one looked for)", "swap_cached_prompt", "end"),
    ("task started on the loop thread (sampler reset, slot set)", "on_task", "end"),
    ("prompt's decode called", "decode", "start"),
    ("prompt's decode returned (first token sampled)", "decode", "end"),
    ("first token accepted (stop checks, its result)", "accept", "end"),
    ("its result handed to the event loop", "flush", "end"),
    ("event loop woken by the doorbell", "doorbell", "start"),
    ("first result read by the handler", "first_results", "end"),
    ("first event handed to the socket (send called)", "send_body", "start"),
]


def install_tracer(path: str) -> None:
    """Timestamps at the milestones' functions, dumped to ``path`` at exit."""
    from uvicorn.protocols.http import httptools_impl

    from pyllama_yield.api import bridge
    from pyllama_yield.server import async_reader, batching, context, emitter, outputs, slot_start, task_builder

    events: list[tuple[int, int, str, str]] = []  # (ns, thread, label, start|end)
    clock = time.perf_counter_ns

    def wrap(owner: Any, name: str, label: str, only: Any = None) -> None:
        """``owner.name`` stamped at its start and end (the calls ``only(*args)`` accepts)."""
        f = getattr(owner, name)

        def stamp(edge: str, args: tuple[Any, ...]) -> None:
            if only is None or only(*args):
                events.append((clock(), threading.get_ident(), label, edge))

        if inspect.iscoroutinefunction(f):

            @functools.wraps(f)
            async def awaited(*args: Any, **kw: Any) -> Any:
                stamp("start", args)
                out = await f(*args, **kw)
                stamp("end", args)
                return out

            setattr(owner, name, awaited)
        else:

            @functools.wraps(f)
            def called(*args: Any, **kw: Any) -> Any:
                stamp("start", args)
                out = f(*args, **kw)
                stamp("end", args)
                return out

            setattr(owner, name, called)

    wrap(httptools_impl.HttpToolsProtocol, "data_received", "recv")
    body = lambda _cycle, message: message.get("type") == "http.response.body"  # noqa: E731
    wrap(httptools_impl.RequestResponseCycle, "send", "send_body", only=body)
    wrap(bridge.Bridge, "make_tasks", "make_tasks")
    wrap(task_builder.TaskBuilder, "tokenize", "tokenize")
    wrap(bridge.Bridge, "submit", "submit")
    wrap(context.ServerContext, "_on_task", "on_task")
    wrap(slot_start, "choose_slot", "choose_slot")  # module functions, looked up there at each call
    wrap(slot_start, "swap_cached_prompt", "swap_cached_prompt")
    wrap(batching.BatchStep, "_decode", "decode")
    wrap(outputs.DecodeOutputs, "accept", "accept")
    wrap(emitter.SlotEmitter, "flush", "flush")
    wrap(async_reader.Doorbell, "_answer", "doorbell")
    wrap(bridge.Bridge, "_first_results", "first_results")
    atexit.register(lambda: Path(path).write_text(json.dumps(events)))


def timelines(events: list[list[Any]]) -> list[list[float]]:
    """Each request's milestones (us after its arrival: the last read from its socket before its
    tasks are built, so its body's when the client sent that apart), found in order."""
    events.sort()
    builds = [i for i, e in enumerate(events) if e[2] == "make_tasks" and e[3] == "start"]
    out = []
    for k, i in enumerate(builds):
        arrival = next((m for m in range(i - 1, -1, -1) if events[m][2] == "recv" and events[m][3] == "start"), -1)
        if arrival < 0:
            continue
        end = builds[k + 1] if k + 1 < len(builds) else len(events)
        t0, j, marks = events[arrival][0], i, [0.0]
        for _, label, edge in MILESTONES[1:]:
            j = next((m for m in range(j, end) if events[m][2] == label and events[m][3] == edge), -1)
            if j < 0:
                break
            marks.append((events[j][0] - t0) / 1e3)
        if len(marks) == len(MILESTONES):
            out.append(marks)
    return out


def client_ttft(port: int, n: int, n_predict: int) -> list[float]:
    """One client, ``n`` streamed requests with distinct prompts: each one's time to first event (ms)."""
    ttft: list[float] = []
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        while len(ttft) < n:
            body = {"prompt": f"Client {len(ttft)} says: once upon a time", "n_predict": n_predict, "stream": True}
            body |= {"temperature": 0.0, "ignore_eos": True, "cache_prompt": False}
            t0, first = time.perf_counter(), None
            try:
                with client.stream("POST", "/completion", json=body) as r:
                    r.raise_for_status()
                    for line in r.iter_lines():
                        if first is None and line.startswith("data: "):
                            first = time.perf_counter()
            except httpx.RemoteProtocolError:  # llama-server closed the kept-alive connection: again
                continue
            assert first is not None
            ttft.append((first - t0) * 1e3)
    return ttft


def main() -> int:
    if sys.argv[1:2] == ["--traced"]:  # the server side: serve with the tracer installed
        sys.path.insert(0, os.getcwd())  # the code of the checkout it runs in (--ours-tree), as `-m` would
        install_tracer(os.environ["TRACE_FIRST_TOKEN_OUT"])
        sys.argv = ["pyllama_yield", *sys.argv[2:]]
        runpy.run_module("pyllama_yield", run_name="__main__")
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-server", type=Path, required=True)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--n-predict", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ours-tree", type=Path, default=REPO, help="the checkout whose server is traced")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "trace_first_token.json")
    a = ap.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        model = bench_model(Path(tmp), "2x64.gguf", n_ctx=4096, **MODELS["2x64"])
        flags = ["-m", str(model), "-t", "1", "-np", "1", "-c", "4096"]
        trace = Path(tmp) / "trace.json"
        servers = {
            "ours": [sys.executable, str(Path(__file__).resolve()), "--traced", "serve"],
            "llama-server": [str(a.llama_server.resolve()), "--no-webui"],
        }
        for r in range(a.repeat):
            for name, cmd in servers.items():
                os.environ["TRACE_FIRST_TOKEN_OUT"] = str(trace)
                proc, port = fresh_server(cmd, flags, cwd=a.ours_tree)
                try:
                    ttft = client_ttft(port, a.requests, a.n_predict)
                finally:
                    stop_server(proc)
                skip = len(ttft) // 5
                row: dict[str, Any] = {"server": name, "round": r, "ttft_p50_ms": statistics.median(ttft[skip:])}
                if name == "ours":
                    lines = timelines(json.loads(trace.read_text()))[skip:]
                    row["milestones_us"] = {
                        m[0]: statistics.median(t[k] for t in lines) for k, m in enumerate(MILESTONES)
                    }
                    row["requests_traced"] = len(lines)
                rows.append(row)
                print(json.dumps(row), flush=True)
    result: dict[str, Any] = {"commit": git_commit(a.ours_tree), "model": "2x64", "rows": rows}
    result["flags"] = {k: str(v) for k, v in vars(a).items() if k != "out"}
    write_json("trace_first_token", result, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
