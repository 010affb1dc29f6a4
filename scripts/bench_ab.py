#!/usr/bin/env python3
"""Two builds of our own server side by side: the serving load of ``bench_serving.py`` (fresh
server per round, N streaming clients, ``/metrics`` polled), A and B taking turns, the median of
``--repeat`` rounds, and the ratios B ÷ A. For "did this change cost anything": e.g. the code
before a change (a ``git worktree`` of the older commit on ``PYTHONPATH``) against the code now.

    git worktree add /tmp/before OLD_COMMIT
    scripts/bench_ab.py --a "env PYTHONPATH=/tmp/before python -m pyllama_yield serve" \\
                        --b "python -m pyllama_yield serve" --label-a before --label-b after \\
                        --out benchmarks/ab/NAME.json
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
from _bench import bench_model, print_table, write_json  # noqa: E402
from bench_serving import KEYS, one_round  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="command of server A (the baseline)")
    ap.add_argument("--b", required=True, help="command of server B")
    ap.add_argument("--label-a", default="a")
    ap.add_argument("--label-b", default="b")
    ap.add_argument("--clients", default="1,8")
    ap.add_argument("--n-predict", type=int, default=200)
    ap.add_argument("--burst-tokens", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--poll-ms", type=float, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--model", type=Path, help="GGUF model (default: Gemma 3 270M if installed, else a tiny one)")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    from pyllama_yield.testing import real_model_path

    servers = {a.label_a: a.a.split(), a.label_b: a.b.split()}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        model = a.model or real_model_path() or bench_model(Path(tmp))
        for n in [int(x) for x in a.clients.split(",")]:
            flags = ["-m", str(model), "-t", str(a.threads), "-np", str(n), "-c", str(n * 1024), "--metrics"]
            for r in range(a.repeat):
                for name in list(servers) if r % 2 == 0 else list(servers)[::-1]:
                    got = one_round(servers[name], flags, n, a.burst_tokens, a.n_predict, a.poll_ms / 1e3)
                    rows.append({"server": name, "clients": n, "round": r, **got})
                    print(json.dumps(rows[-1]), flush=True)
    def median(server: str, n: int, key: str) -> float:
        return statistics.median(r[key] for r in rows if r["server"] == server and r["clients"] == n)

    clients = dict.fromkeys(r["clients"] for r in rows)
    medians = [{"server": s, "clients": n, **{k: median(s, n, k) for k in KEYS}} for n in clients for s in servers]
    print_table(medians, ["server", "clients", *KEYS])
    ratios: dict[str, Any] = {}
    for n in dict.fromkeys(m["clients"] for m in medians):
        base, new = (next(m for m in medians if m["server"] == s and m["clients"] == n) for s in servers)
        ratios[str(n)] = {k: new[k] / base[k] if base[k] else None for k in KEYS}
    print(json.dumps(ratios, indent=1))
    commit = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True)
    result = {"commit": commit.stdout.strip(), "model": Path(str(model)).name,
              "flags": {k: str(v) for k, v in vars(a).items() if k != "out"}, "rows": rows, "medians": medians,
              "ratios_b_over_a": ratios}  # fmt: skip
    write_json("bench_ab", result, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
