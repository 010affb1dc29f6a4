#!/usr/bin/env python3
"""Function calling: the model asks for a tool, we run it, the model answers with its result.

With ``tool_choice`` naming a function the call is forced, and its arguments follow the
function's JSON schema even when the model's template has no tool-call format.

    python examples/tool_calling.py -m gemma-3-270m-q4_k_m.gguf
"""

from __future__ import annotations

import argparse
import json

from pyllama_yield import Llama

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
        },
    },
}


def get_weather(city: str, unit: str) -> dict[str, object]:
    return {"city": city, "temperature": 21 if unit == "celsius" else 70, "unit": unit, "sky": "clear"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-m", "--model", required=True)
    args = ap.parse_args()
    with Llama(args.model, n_ctx=4096, seed=42) as llm:
        messages = [{"role": "user", "content": "What is the weather like in Paris, in celsius?"}]
        out = llm.create_chat_completion(
            messages=messages,
            tools=[WEATHER],
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
            temperature=0.2,
        )
        call = out["choices"][0]["message"]["tool_calls"][0]
        arguments = json.loads(call["function"]["arguments"])
        print(f"the model calls {call['function']['name']}({arguments})")
        result = get_weather(**arguments)
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)},
        ]
        answer = llm.create_chat_completion(messages=messages, max_tokens=96)
        print(answer["choices"][0]["message"]["content"])


if __name__ == "__main__":
    main()
