#!/usr/bin/env python3
"""Semantic search with embeddings: rank sentences by cosine similarity to a query.

    python examples/embeddings.py -m gemma-3-270m-q4_k_m.gguf
"""

from __future__ import annotations

import argparse

import numpy as np

from pyllama_yield import Llama

DOCUMENTS = [
    "The cat sat on the mat.",
    "Stock markets fell sharply on Monday.",
    "A kitten is sleeping on the rug.",
    "The central bank raised interest rates.",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("query", nargs="?", default="Where is the cat?")
    args = ap.parse_args()
    # mean pooling (llama.cpp's LLAMA_POOLING_TYPE_MEAN): one vector per text
    with Llama(args.model, embedding=True, pooling_type=1) as llm:
        docs = np.array(llm.embed(DOCUMENTS, normalize=True))
        query = np.array(llm.embed(args.query, normalize=True))
        for score, doc in sorted(zip(docs @ query, DOCUMENTS, strict=True), reverse=True):
            print(f"{score:.3f}  {doc}")


if __name__ == "__main__":
    main()
