#!/usr/bin/env python3
"""The host cost per token and per request at GPU speed: ours against llama-server on models
that decode in about a millisecond or less on this CPU (made by ``testing.make_tiny_model``).

At that speed the work around each ``llama_decode`` (ours in Python, llama-server's in C++)
decides what a client gets. For each model, client count, endpoint and mode, the two servers
take turns (``--repeat`` rounds, each on a freshly started server with the same flags:
``-t T -np N -c N×1024``), and each round measures:
1. **cold**: the first request a fresh server gets (one client, ``--burst-tokens`` tokens):
   its time to first token (streamed) or to its answer (not streamed);
2. **load**: N clients at once, each asking for ``--n-predict`` tokens (EOS ignored, greedy,
   no prompt cache): aggregate tokens/s; streamed, also time to first token p50 and the gaps
   between tokens (ITL) p50/p99; not streamed, the answer's time p50;
3. **warm** (streamed only): ``--warm-waves`` waves, one after another, of N clients at once each
   asking for ``--burst-tokens`` tokens: the time to first token p50 over all of them, the cost of
   a request on a warm server (at one client the load gives one time to first token per round).

Endpoints: llama-server's ``/completion`` and OpenAI's ``/v1/chat/completions``. Writes every
round to ``benchmarks/bench_host_cost.json`` (``--out``) with the commit, the machine and the
flags; the medians and ratios (ours ÷ llama-server) are printed and recomputed from the rows by
``scripts/readme_figures.py``.

    scripts/bench_host_cost.py --llama-server build/llama-server/bin/llama-server
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from _bench import bench_model, git_commit, print_table, run_clients, write_json  # noqa: E402
from bench_serving import fresh_server, stop_server  # noqa: E402

# name -> make_tiny_model's shape: decode steps of ~0.6 ms and ~2.3 ms on one core here
MODELS = {
    "2x64": {"n_embd": 64, "n_layer": 2, "n_head": 8, "n_head_kv": 4},
    "4x256": {"n_embd": 256, "n_layer": 4, "n_head": 8, "n_head_kv": 4},
}
ENDPOINTS = {"completion": "/completion", "chat": "/v1/chat/completions"}
KEYS = ("tokens_per_s", "ttft_p50_ms", "itl_p50_ms", "itl_p99_ms", "latency_p50_ms", "cold_ms", "warm_ttft_p50_ms")


def request_body(endpoint: str, i: int, n_predict: int, stream: bool) -> dict[str, Any]:
    common = {"temperature": 0.0, "ignore_eos": True, "stream": stream, "cache_prompt": False}
    if endpoint == "completion":
        return {"prompt": f"Client {i} says: once upon a time", "n_predict": n_predict, **common}
    return {
        "model": "any",
        "messages": [{"role": "user", "content": f"Client {i} says: once upon a time"}],
        "max_tokens": n_predict,
        **({"stream_options": {"include_usage": True}} if stream else {}),
        **common,
    }


def _tokens_of(endpoint: str, answer: dict[str, Any]) -> int | None:
    """The generated tokens an answer (or a stream's last event) reports, if it does."""
    if endpoint == "completion":
        return answer.get("tokens_predicted") if answer.get("stop") else None
    usage = answer.get("usage")
    return usage.get("completion_tokens") if usage else None


def one_client(client: httpx.Client, url: str, endpoint: str, body: dict[str, Any]) -> tuple[list[int], int, int]:
    """One request: the times (ns) of its token events (streamed; else the answer's), the tokens
    it reports and its end time."""
    times: list[int] = []
    tokens = 0
    if not body["stream"]:
        r = client.post(url, json=body)
        r.raise_for_status()
        t = time.perf_counter_ns()
        return [t], _tokens_of(endpoint, r.json()) or 0, t
    with client.stream("POST", url, json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            t = time.perf_counter_ns()
            event = json.loads(line[6:])
            n = _tokens_of(endpoint, event)
            if n is not None:
                tokens = n
            if _has_token(endpoint, event):
                times.append(t)
    return times, tokens, time.perf_counter_ns()


def _has_token(endpoint: str, event: dict[str, Any]) -> bool:
    if endpoint == "completion":
        return bool(event.get("content") or event.get("tokens"))
    choices = event.get("choices") or []
    return bool(choices and (choices[0].get("delta") or {}).get("content"))


def load(port: int, endpoint: str, n: int, n_predict: int, stream: bool) -> dict[str, Any]:
    """``n`` clients at once; per client its first token, its gaps and its answer's time."""
    url = f"http://127.0.0.1:{port}{ENDPOINTS[endpoint]}"
    ttft: list[int] = []
    gaps: list[int] = []
    latency: list[int] = []
    tokens = [0] * n
    lock = threading.Lock()

    def client(i: int, start: Callable[[], object]) -> None:
        with httpx.Client(timeout=600) as c:
            start()
            t0 = time.perf_counter_ns()
            times, tokens[i], t1 = one_client(c, url, endpoint, request_body(endpoint, i, n_predict, stream))
        with lock:
            latency.append(t1 - t0)
            if stream and times:
                ttft.append(times[0] - t0)
                gaps.extend(b - a for a, b in zip(times, times[1:], strict=False))

    wall = run_clients(n, client)
    ms = lambda xs, q: sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] / 1e6 if xs else None  # noqa: E731
    return {
        "ttfts_ns": ttft,
        "tokens": sum(tokens),
        "tokens_per_s": sum(tokens) / wall,
        "ttft_p50_ms": ms(ttft, 0.5),
        "itl_p50_ms": ms(gaps, 0.5),
        "itl_p99_ms": ms(gaps, 0.99),
        "latency_p50_ms": ms(latency, 0.5),
    }


def one_round(
    cmd: list[str], cwd: Path, flags: list[str], endpoint: str, n: int, stream: bool, a: argparse.Namespace
) -> dict:
    proc, port = fresh_server(cmd, flags, cwd=cwd)
    try:
        cold = load(port, endpoint, 1, a.burst_tokens, stream)
        got = load(port, endpoint, n, a.n_predict, stream)
        waves = [load(port, endpoint, n, a.burst_tokens, True) for _ in range(a.warm_waves if stream else 0)]
    finally:
        stop_server(proc)
    warm = [t for w in waves for t in w["ttfts_ns"]]
    got.pop("ttfts_ns")
    return {
        **got,
        "cold_ms": cold["ttft_p50_ms"] if stream else cold["latency_p50_ms"],
        "warm_ttft_p50_ms": statistics.median(warm) / 1e6 if warm else None,
    }


def medians(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["endpoint"], r["stream"], r["clients"], r["server"]), []).append(r)
    out = []
    for (model, endpoint, stream, clients, server), rs in groups.items():
        m = {k: statistics.median(r[k] for r in rs) if rs[0][k] is not None else None for k in KEYS}
        out.append({"model": model, "endpoint": endpoint, "stream": stream, "clients": clients, "server": server, **m})
    return out


Peers = dict[str, tuple[list[str], Path]]  # name -> (command, the checkout it runs from)


def add_arguments(ap: argparse.ArgumentParser, out_name: str, **defaults: Any) -> None:
    """The options of both host-cost benchmarks: what to load the servers with, and the peers.
    ``defaults`` overrides a default by its option's name (``clients``, ``endpoints``, ``warm_waves``)."""
    d = {"clients": "1,4,16", "endpoints": "completion,chat", "warm_waves": 20, **defaults}
    ap.add_argument("--models", default="2x64,4x256", help=f"of {', '.join(MODELS)}")
    ap.add_argument("--clients", default=d["clients"])
    ap.add_argument("--endpoints", default=d["endpoints"])
    ap.add_argument("--modes", default="stream,plain", help="stream and/or plain (not streamed)")
    ap.add_argument("--n-predict", type=int, default=400)
    ap.add_argument("--burst-tokens", type=int, default=16, help="tokens of a short request (cold, warm waves)")
    ap.add_argument("--warm-waves", type=int, default=d["warm_waves"], help="waves of short requests for the warm TTFT")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--llama-server", type=Path, required=True, help="llama.cpp's llama-server")
    ap.add_argument("--ours", default=f"{sys.executable} -m pyllama_yield serve", help="our server's command")
    ap.add_argument("--ours-tree", type=Path, default=REPO, help="the checkout our server runs from")
    ap.add_argument("--before-tree", type=Path, help="a checkout at an earlier commit: a third peer, 'ours-before'")
    ap.add_argument("--before-cmd", help="the third peer's command (default: --ours)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / f"{out_name}.json")


def peers(a: argparse.Namespace) -> Peers:
    servers = {
        "ours": (a.ours.split(), a.ours_tree),
        "llama-server": ([str(a.llama_server.resolve()), "--no-webui"], REPO),
    }
    if a.before_tree:
        servers["ours-before"] = ((a.before_cmd or a.ours).split(), a.before_tree)
    return servers


def configurations(a: argparse.Namespace, tmp: Path) -> Iterator[tuple[dict[str, Any], list[str]]]:
    """Each model × clients × endpoint × mode asked for: its rows' fields and the servers' flags."""
    for model in a.models.split(","):
        path = bench_model(tmp, f"{model}.gguf", n_ctx=4096, **MODELS[model])
        for n in [int(x) for x in a.clients.split(",")]:
            flags = ["-m", str(path), "-t", str(a.threads), "-np", str(n), "-c", str(n * 1024)]
            for endpoint in a.endpoints.split(","):
                for mode in a.modes.split(","):
                    yield {"model": model, "endpoint": endpoint, "stream": mode == "stream", "clients": n}, flags


def save(name: str, a: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    """Every row with the commits and the flags it was measured with."""
    flags_used = {k: str(v) for k, v in vars(a).items() if k != "out"}
    result: dict[str, Any] = {"commit": git_commit(a.ours_tree), "flags": flags_used, "rows": rows}
    if a.before_tree:
        result["before_commit"] = git_commit(a.before_tree)
    write_json(name, result, a.out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap, "bench_host_cost")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    servers = peers(a)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for config, flags in configurations(a, Path(tmp)):
            for r in range(a.repeat):  # the servers take turns, the first rotating
                names = list(servers)[r % len(servers) :] + list(servers)[: r % len(servers)]
                for name in names:
                    got = one_round(*servers[name], flags, config["endpoint"], config["clients"], config["stream"], a)
                    rows.append({"server": name, **config, "round": r, **got})
                    print(json.dumps(rows[-1]), flush=True)
    print_table(medians(rows), ["model", "endpoint", "stream", "clients", "server", *KEYS])
    save("bench_host_cost", a, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
