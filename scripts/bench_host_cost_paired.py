#!/usr/bin/env python3
"""The host cost at GPU speed, measured in pairs: ours and llama-server running side by side (both
started fresh for each session, one idle while the other serves), a load on one, then the same load
on the other, so that each ratio compares two measurements seconds apart.

On this machine a server's tokens/s moves by 10-40 % between loads a few seconds apart, in one
process as between fresh starts: more than the margins the targets ask about (0.95 of
llama-server's tokens/s, 1.1× its time to first token). A pair leaves out what moves every process
at once; in the committed run that was little of it (the pair ratios' quartiles span about as much
as either server's own loads), so the answer comes from the number of pairs: the median of many,
over many fresh starts, with their spread beside it.

For each model, mode and session: the servers start (the order rotating by session), then
``--pairs`` times, in an order that alternates from pair to pair, each server gets the load of
``bench_host_cost.load`` (N clients of ``--n-predict`` greedy tokens, EOS ignored, no prompt
cache) and, streamed, ``--warm-waves`` waves of requests of ``--burst-tokens`` tokens for the warm
time to first token. Writes every load to ``benchmarks/bench_host_cost_paired.json`` (``--out``);
the ratios are printed and recomputed from the rows by ``scripts/readme_figures.py``.

    scripts/bench_host_cost_paired.py --llama-server build/llama-server/bin/llama-server
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from _figures_host import paired_ratios  # noqa: E402
from bench_host_cost import Peers, add_arguments, configurations, load, peers, save  # noqa: E402
from bench_serving import fresh_server, stop_server  # noqa: E402


def one_pair(
    ports: dict[str, int], order: list[str], endpoint: str, n: int, stream: bool, a: argparse.Namespace
) -> dict[str, dict[str, Any]]:
    """Each server in ``order``: the load, then the warm waves; a row of figures per server."""
    out = {}
    for name in order:
        got = load(ports[name], endpoint, n, a.n_predict, stream)
        got.pop("ttfts_ns")
        waves = [load(ports[name], endpoint, n, a.burst_tokens, True) for _ in range(a.warm_waves if stream else 0)]
        warm = [t for w in waves for t in w["ttfts_ns"]]
        out[name] = {**got, "warm_ttft_p50_ms": statistics.median(warm) / 1e6 if warm else None}
    return out


def session(
    servers: Peers, flags: list[str], endpoint: str, n: int, stream: bool, s: int,
    a: argparse.Namespace,
) -> list[dict[str, Any]]:  # fmt: skip
    """Fresh servers, then ``--pairs`` pairs of loads: the session's rows."""
    names = list(servers)
    started = names[s % len(names) :] + names[: s % len(names)]
    procs: dict[str, subprocess.Popen[bytes]] = {}
    ports: dict[str, int] = {}
    rows = []
    try:
        for name in started:
            cmd, tree = servers[name]
            procs[name], ports[name] = fresh_server(cmd, flags, cwd=tree)
        for p in range(a.pairs):
            order = started if p % 2 == 0 else started[::-1]
            for name, got in one_pair(ports, order, endpoint, n, stream, a).items():
                rows.append({"server": name, "session": s, "pair": p, "first": name == order[0], **got})
    finally:
        for proc in procs.values():
            stop_server(proc)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap, "bench_host_cost_paired", clients="1", endpoints="completion", warm_waves=10)
    ap.add_argument("--sessions", type=int, default=8, help="fresh starts of the servers per configuration")
    ap.add_argument("--pairs", type=int, default=3, help="pairs of loads per session")
    a = ap.parse_args()
    servers = peers(a)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for config, flags in configurations(a, Path(tmp)):
            for s in range(a.sessions):
                for row in session(servers, flags, config["endpoint"], config["clients"], config["stream"], s, a):
                    rows.append({**config, **row})
                    print(json.dumps(rows[-1]), flush=True)
    for r in paired_ratios(rows):
        print(json.dumps(r))
    save("bench_host_cost_paired", a, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
