#!/usr/bin/env python3
"""Write the README's benchmark figures from the committed results under ``benchmarks/``.

Each table sits between ``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->`` in README.md and
is made from ``benchmarks/NAME.json``, every row of it. The medians and ratios are computed here from
the rows, never read from the file's own summary, and a summary that disagrees with its rows is an
error. ``--check`` fails when the README differs from what the results say (a figure edited by hand,
a result committed without its table) or when a table's file is missing.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

sys.path.insert(0, str(REPO / "scripts"))
from _figures_bench import (  # noqa: E402
    FAIR_SHARE_KEYS,
    bench_decode,
    bench_fair_share,
    bench_llama_api,
    bench_many,
    bench_rpc,
    bench_serving,
    bench_webui,
    profile_host_cost,
    profile_medians,
    ratio,
    trace_first_token,
)
from _figures_builds import bench_builds, suite_counts, upstream_server_tests, wheel_builds, wheel_checks  # noqa: E402
from _figures_host import bench_host_cost, bench_host_cost_paired, host_cost_ratios, paired_ratios  # noqa: E402

TABLES: dict[str, Callable[[dict[str, Any]], str]] = {
    "upstream_server_tests": upstream_server_tests,
    "wheel_builds": wheel_builds,
    "wheel_checks": wheel_checks,
    "bench_builds": bench_builds,
    "bench_llama_api": bench_llama_api,
    "bench_serving": bench_serving,
    "bench_webui": bench_webui,
    "bench_rpc": bench_rpc,
    "bench_host_cost": bench_host_cost,
    "bench_host_cost_paired": bench_host_cost_paired,
    "bench_decode": bench_decode,
    "profile_host_cost": profile_host_cost,
    "trace_first_token": trace_first_token,
    "bench_fair_share": bench_fair_share,
    "bench_many": bench_many,
}


def _median_rows(rows: list[dict[str, Any]], by: tuple[str, ...], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """One row per distinct ``by`` value: the median of each key. Ordered as the benchmark scripts
    order them: by the first ``by`` field, then the next, each in its order of first appearance."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in by), []).append(row)
    seen = [list(dict.fromkeys(row[k] for row in rows)) for k in by]
    order = sorted(groups, key=lambda group: [seen[i].index(v) for i, v in enumerate(group)])
    return [
        {**dict(zip(by, group, strict=True)), **{k: statistics.median(r[k] for r in groups[group]) for k in keys}}
        for group in order
    ]


def _summaries(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """The summary fields of a result, recomputed from its rows as the benchmark script computes them."""
    if name == "bench_llama_api":
        med = {m["peer"]: m["tok_s"] for m in _median_rows(result["rounds"], ("peer",), ("tok_s",))}
        ratios = {"ours_over_http": med["ours"] / med["http"]}
        if "lcp" in med:
            ratios["ours_over_lcp_serialized"] = med["ours"] / med["lcp"]
        return {"median_tok_s": med, "ratios": ratios}
    if name == "bench_serving":
        keys = tuple(result["medians"][0].keys() - {"server", "clients"})
        medians = _median_rows(result["rows"], ("server", "clients"), keys)
        by = {(m["server"], m["clients"]): m for m in medians}
        per_n: dict[str, Any] = {}
        for n in dict.fromkeys(m["clients"] for m in medians):
            ours, theirs = by.get(("ours", n)), by.get(("llama-server", n))
            if ours and theirs:
                per_n[str(n)] = {k: ratio(ours[k], theirs[k]) for k in keys}
        bursts = result.get("big_burst", [])
        if len(bursts) == 2:
            per_n["big_burst_slowest_first_event"] = ratio(
                bursts[0]["first_event_slowest_ms"], bursts[1]["first_event_slowest_ms"]
            )
        return {"medians": medians, "ratios": per_n}
    if name == "bench_host_cost":
        return {"ratios": host_cost_ratios(result["rows"])}
    if name == "bench_host_cost_paired":
        return {"paired": paired_ratios(result["rows"])}
    if name == "bench_many":
        medians = _median_rows(result["rows"], ("peer",), ("tokens_per_s",))
        order = {"ours": 0, "llama-batched-bench": 1}
        medians.sort(key=lambda m: order[m["peer"]])
        return {"medians": medians, "ratio": medians[0]["tokens_per_s"] / medians[1]["tokens_per_s"]}
    if name == "bench_fair_share":
        medians = _median_rows(result["rows"], ("server",), FAIR_SHARE_KEYS)
        if len(medians) < 2:
            return {"medians": medians, "ratios": {}}
        ours, theirs = medians
        return {"medians": medians, "ratios": {k: ours[k] / theirs[k] for k in FAIR_SHARE_KEYS if theirs[k]}}
    if name == "profile_host_cost":
        return {"medians": profile_medians(result["rows"])}
    if name == "bench_decode":
        n_gen = result["config"]["n_gen"]
        summary = {}
        for impl, rs in result["rows"].items():
            tgs = [n_gen / r["tg_s"] for r in rs]
            pp = statistics.median(result["prompt_tokens"] / r["pp_s"] for r in rs)
            summary[impl] = {"tg_tokens_per_s": statistics.median(tgs), "tg_tokens_per_s_best": max(tgs)}
            summary[impl]["pp_tokens_per_s"] = pp
        py, c = summary["python"], summary["c"]
        return {
            "results": summary,
            "python_vs_c_tokens_per_s_ratio": py["tg_tokens_per_s"] / c["tg_tokens_per_s"],
            "python_vs_c_tokens_per_s_ratio_best_of_rounds": py["tg_tokens_per_s_best"] / c["tg_tokens_per_s_best"],
        }
    if name == "upstream_server_tests":
        counts = suite_counts(result["files"])
        llama = sum(len(c["llama_passed"]) for c in counts.values())
        ours = sum(len(c["ours_too"]) for c in counts.values())
        return {"llama_passed": llama, "ours_passed_of_llama": ours, "ratio": ours / llama if llama else None}
    if name == "bench_webui":
        med = {m["page"]: m["tok_s"] for m in _median_rows(result["rows"], ("page",), ("tok_s",))}
        return {"median_tok_s": med, "ratio_open_closed": med["open"] / med["closed"]}
    if name == "bench_rpc":
        medians = _median_rows(result["rows"], ("setup",), ("prompt_tok_s", "decode_tok_s"))
        local = medians[0]
        ratios = {m["setup"]: {k: m[k] / local[k] for k in ("prompt_tok_s", "decode_tok_s")} for m in medians[1:]}
        return {"medians": medians, "ratios_over_local": ratios}
    return {}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9)
    return a == b


def load_result(name: str) -> dict[str, Any]:
    """A result with its summary recomputed from its rows; an error if the file's summary disagrees."""
    path = REPO / "benchmarks" / f"{name}.json"
    if not path.exists():
        raise SystemExit(f"README.md shows figures:{name}, but {path.relative_to(REPO)} is not committed")
    result = json.loads(path.read_text())
    for key, value in _summaries(name, result).items():
        if key in result and not _same(result[key], value):
            raise SystemExit(f"{path.relative_to(REPO)}: its '{key}' is not what its rows give")
        result[key] = value
    return result


def render(readme: str) -> str:
    for name, make in TABLES.items():
        pattern = re.compile(rf"(<!-- figures:{name} -->\n).*?(<!-- /figures:{name} -->)", re.S)
        found = pattern.search(readme)
        if found is None:
            raise SystemExit(f"README.md has no <!-- figures:{name} --> block")
        block = make(load_result(name))
        readme = readme[: found.end(1)] + block + "\n" + readme[found.start(2) :]
    return readme


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="fail if the README's figures are not the results'")
    a = ap.parse_args()
    path = REPO / "README.md"
    old = path.read_text()
    new = render(old)
    if a.check:
        if new != old:
            print("README.md figures differ from benchmarks/*.json: run scripts/readme_figures.py", file=sys.stderr)
            return 1
        return 0
    path.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
