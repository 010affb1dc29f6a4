#!/usr/bin/env python3
"""A batch job from a thread pool: one ``Llama`` serves every thread at once, batching their
sequences on one loop thread (llama-cpp-python's ``Llama`` needs a lock around each call).

    python examples/threaded_batch.py -m gemma-3-270m-q4_k_m.gguf --workers 8
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

from pyllama_yield import Llama

TOPICS = ["volcanoes", "honey bees", "the printing press", "glaciers", "jazz", "lighthouses", "origami", "comets"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--workers", type=int, default=8)
    args = ap.parse_args()
    with Llama(args.model, n_ctx=512, n_parallel=args.workers) as llm:

        def summarize(topic: str) -> tuple[str, str, int]:
            out = llm(f"Q: Write one sentence about {topic}.\nA:", max_tokens=48, stop=["\n"], temperature=0.3)
            return topic, out["choices"][0]["text"].strip(), out["usage"]["completion_tokens"]

        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.workers) as pool:
            results = list(pool.map(summarize, TOPICS))
        seconds = time.perf_counter() - t0
        for topic, text, _ in results:
            print(f"{topic}: {text}")
        tokens = sum(n for *_, n in results)
        print(f"\n{tokens} tokens in {seconds:.1f} s ({tokens / seconds:.1f} tok/s over {args.workers} threads)")


if __name__ == "__main__":
    main()
