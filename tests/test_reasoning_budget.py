"""The reasoning budget (``--reasoning-budget``, ``reasoning_budget_tokens``): llama.cpp's budget
sampler counts the tokens after the thinking start tag and, once the budget is spent, forces the
budget message and the end tag. QwQ's template opens the thinking section in its generation
prompt, so a tiny random model starts out thinking. (As in llama.cpp, the newline after the tag
in that prompt is the first token the budget counts.)"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from http_server import start_server, stop_server

from pyllama_yield.testing import make_tiny_model

QWQ = "Qwen-QwQ-32B.jinja"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    model = make_tiny_model(tmp_path_factory.mktemp("rb") / "gpt2.gguf", vocab="gpt-2", seed=2)
    template = Path(__file__).resolve().parents[1] / "vendor" / "llama.cpp" / "models" / "templates" / QWQ
    proc, url = start_server(
        model,
        *("-t", "1", "-np", "1", "-c", "2048", "--chat-template-file", str(template)),
        *("--reasoning-budget", "3", "--reasoning-budget-message", " Enough."),
    )
    yield url
    out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


def chat(base: str, **kw) -> dict:
    body = {"messages": [{"role": "user", "content": "Think."}], "max_tokens": 24, "temperature": 0.0, **kw}
    body.setdefault("ignore_eos", True)
    r = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]


def test_the_server_budget_and_a_request_budget_end_thinking(base):
    default = chat(base)  # --reasoning-budget 3: then the message and the end tag are forced
    assert default["reasoning_content"].endswith("Enough.") and default["content"]
    longer = chat(base, reasoning_budget_tokens=8)
    assert longer["reasoning_content"].endswith("Enough.")
    assert len(longer["reasoning_content"]) > len(default["reasoning_content"])
    assert chat(base, thinking_budget_tokens=8)["reasoning_content"] == longer["reasoning_content"]
    other = chat(base, reasoning_budget_tokens=8, reasoning_budget_message=" Stop.")
    assert other["reasoning_content"].endswith("Stop.")
    unlimited = chat(base, reasoning_budget_tokens=-1, max_tokens=12)
    assert "Enough." not in (unlimited.get("reasoning_content") or "") and not unlimited["content"]


def test_native_completion_takes_explicit_tags(base):
    body = {
        "prompt": "<think>\n",
        "generation_prompt": "<think>\n",  # what the samplers take as already generated
        "n_predict": 12,
        "temperature": 0.0,
        "ignore_eos": True,
        "reasoning_budget_tokens": 2,
        "reasoning_budget_start_tag": "<think>",
        "reasoning_budget_end_tag": "</think>",
        "reasoning_budget_message": " Stop.",
    }
    r = httpx.post(f"{base}/completion", json=body, timeout=60).json()
    # the generation prompt opened the section: two tokens of thought, then the message and the end tag
    assert " Stop.</think>" in r["content"]
    assert httpx.post(f"{base}/completion", json={**body, "reasoning_budget_tokens": -2}).status_code == 400
