"""Shared helpers for the benchmark scripts: percentiles, the results table, the JSON file."""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent.parent / "bench-results"


def git_commit(tree: Path) -> str:
    """The checkout's commit (a result says what it measured), ``-dirty`` when what it runs differs
    from it: results and the README a run of benchmarks rewrites do not count."""
    git = ["git", "-C", str(tree)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    changed = subprocess.run(
        [*git, "status", "--porcelain", "--", ".", ":!benchmarks", ":!README.md"], capture_output=True, text=True
    ).stdout.strip()
    return commit + ("-dirty" if changed else "")


def summarize_us(samples_ns: list[int]) -> dict[str, float]:
    """p50/p99/mean/max in microseconds."""
    xs = sorted(samples_ns)
    pick = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))] / 1e3  # noqa: E731
    return {
        "n": len(xs),
        "p50_us": pick(0.50),
        "p99_us": pick(0.99),
        "mean_us": statistics.fmean(xs) / 1e3,
        "max_us": xs[-1] / 1e3,
    }


def print_table(rows: list[dict[str, object]], columns: list[str]) -> None:
    widths = [max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).ljust(w) for c, w in zip(columns, widths, strict=True)))


def _fmt(v: object) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def write_json(name: str, data: dict[str, object], out: Path | None = None) -> Path:
    path = out or RESULTS_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "machine": {
            "python": platform.python_version(),
            "processor": platform.processor(),
            "system": platform.platform(),
        },
        **data,
    }
    path.write_text(json.dumps(data, indent=2))
    print(f"wrote {path}")
    return path


def bench_model(directory: Path, name: str = "bench.gguf", **kwargs: object) -> Path:
    """The model all benchmarks use: tiny, but big enough that a decode step takes milliseconds."""
    from pyllama_yield.testing import make_tiny_model

    params: dict[str, object] = {"n_embd": 256, "n_layer": 4, "n_head": 8, "n_head_kv": 4, "seed": 7}
    params.update(kwargs)
    return make_tiny_model(Path(directory) / name, **params)  # type: ignore[arg-type]


def run_clients(n: int, client: Callable[[int, Callable[[], object]], None]) -> float:
    """Run ``client(i, start)`` on ``n`` threads; each calls ``start()`` when ready, and all go at once.

    Returns the seconds from that common start until the last client is done."""
    barrier = threading.Barrier(n + 1)
    threads = [threading.Thread(target=client, args=(i, barrier.wait)) for i in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def sse_events(client: Any, url: str, body: dict[str, Any], on_event: Callable[[int, dict[str, Any]], None]) -> None:
    """POST ``body`` to ``url`` with an ``httpx.Client`` and call ``on_event(time_ns, data)`` per SSE event."""
    with client.stream("POST", url, json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith("data: "):
                on_event(time.perf_counter_ns(), json.loads(line[6:]))


def stream_clients(url: str, n: int, body: Callable[[int], dict[str, Any]]) -> dict[str, Any]:
    """``n`` streaming clients at once, client ``i`` sending ``body(i)``: per client, the time to its
    first token, the gaps between its tokens and the time to its last event (ns), and the tokens
    it got; the wall time from the common start to the last answer."""
    import httpx

    ttft: list[int] = []
    gaps: list[int] = []
    done: list[int] = []
    tokens = [0] * n
    lock = threading.Lock()

    def client(i: int, start: Callable[[], object]) -> None:
        times: list[int] = []

        def on_event(t: int, event: dict[str, Any]) -> None:
            if event.get("content") or event.get("tokens"):
                times.append(t)
            if event.get("stop"):
                tokens[i] = event.get("tokens_predicted", 0)

        with httpx.Client(timeout=600) as c:
            start()
            t0 = time.perf_counter_ns()
            sse_events(c, url, body(i), on_event)
            t1 = time.perf_counter_ns()
        with lock:
            if times:
                ttft.append(times[0] - t0)
            gaps.extend(b - a for a, b in zip(times, times[1:], strict=False))
            done.append(t1 - t0)

    wall = run_clients(n, client)
    return {"wall_s": wall, "tokens": sum(tokens), "ttft": ttft, "gaps": gaps, "done": done}


def streaming_body(i: int, n_predict: int) -> dict[str, Any]:
    """Client ``i``'s request in the serving benchmarks: ``n_predict`` greedy tokens, streamed,
    EOS ignored, no prompt cache (every client the same work)."""
    return {
        "prompt": f"Client {i} says: once upon a time",
        "n_predict": n_predict,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": True,
        "cache_prompt": False,
    }
