#!/usr/bin/env python3
"""A terminal chat with a local model, streamed token by token.

    python examples/chat_loop.py -m gemma-3-270m-q4_k_m.gguf
"""

from __future__ import annotations

import argparse

from pyllama_yield import Llama


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--system", default="You are a helpful assistant.")
    args = ap.parse_args()
    with Llama(args.model, n_ctx=4096) as llm:
        messages = [{"role": "system", "content": args.system}]
        while True:
            try:
                user = input("> ")
            except (EOFError, KeyboardInterrupt):
                print()
                return
            messages.append({"role": "user", "content": user})
            reply = ""
            for chunk in llm.create_chat_completion(messages=messages, max_tokens=512, stream=True):
                piece = chunk["choices"][0]["delta"].get("content") or ""
                reply += piece
                print(piece, end="", flush=True)
            print()
            messages.append({"role": "assistant", "content": reply})


if __name__ == "__main__":
    main()
