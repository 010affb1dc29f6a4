#!/usr/bin/env python3
"""Output that parses: a chat answer constrained by a JSON schema (llama.cpp's grammar), and a
completion constrained by a grammar of your own.

    python examples/json_schema.py -m gemma-3-270m-q4_k_m.gguf
"""

from __future__ import annotations

import argparse
import json

from pyllama_yield import Llama, LlamaGrammar

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "languages": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["name", "age", "languages"],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-m", "--model", required=True)
    args = ap.parse_args()
    with Llama(args.model, n_ctx=2048, seed=7) as llm:
        out = llm.create_chat_completion(
            messages=[{"role": "user", "content": "Invent a software engineer and describe them."}],
            response_format={"type": "json_object", "schema": PERSON},
            temperature=0.7,
        )
        person = json.loads(out["choices"][0]["message"]["content"])
        print(json.dumps(person, indent=2))
        yes_no = LlamaGrammar.from_string('root ::= "yes" | "no"')
        answer = llm("Q: Is the sky blue on a clear day? A: ", grammar=yes_no, max_tokens=4)
        print("yes or no:", answer["choices"][0]["text"])


if __name__ == "__main__":
    main()
