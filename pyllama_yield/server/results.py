"""The payloads a completion sends, in llama-server's native (``/completion``) shape.

The OpenAI routes reshape these (``api/openai.py``); the fields they need beyond the native
shape (``n_prompt_tokens_cache``) travel along in the same dict.
"""

from __future__ import annotations

from typing import Any

from .slot import Slot, StopType, now

__all__ = ["final_payload", "partial_payload", "timings"]


def timings(s: Slot) -> dict[str, Any]:
    """llama-server's ``timings``: prompt time up to the last prompt batch so far; generation
    rates over decode steps, since the first token comes free with the prompt's logits."""
    prompt_ms = s.prompt_seconds() * 1e3
    gen_ms = s.gen_seconds() * 1e3
    n_prompt = s.n_prompt_processed
    n_gen = len(s.generated)
    steps = max(n_gen - 1, 0)
    out: dict[str, Any] = {
        "cache_n": s.n_prompt_cached,
        "prompt_n": n_prompt,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / n_prompt if n_prompt else 0.0,
        "prompt_per_second": n_prompt / prompt_ms * 1e3 if prompt_ms > 0 else 0.0,
        "predicted_n": n_gen,
        "predicted_ms": gen_ms,
        "predicted_per_token_ms": gen_ms / steps if steps else 0.0,
        "predicted_per_second": steps / gen_ms * 1e3 if gen_ms > 0 else 0.0,
    }
    if s.n_draft_total:
        out["draft_n"] = s.n_draft_total
        out["draft_n_accepted"] = s.n_draft_accepted
    return out


def partial_payload(s: Slot, token: int, content: str, probs: dict[str, Any] | None) -> dict[str, Any]:
    task = s.completion
    out: dict[str, Any] = {
        "index": task.index,
        "content": content,
        "tokens": [token],
        "stop": False,
        "id_slot": s.id,
        "tokens_predicted": len(s.generated),
        "tokens_evaluated": len(s.prompt_tokens),
        "n_prompt_tokens_cache": s.n_prompt_cached,
    }
    if task.params.timings_per_token:
        out["timings"] = timings(s)
    if probs is not None:
        out["completion_probabilities"] = [probs]
    return out


def progress_payload(s: Slot) -> dict[str, Any]:
    """A ``return_progress`` event: how far prompt processing is."""
    task = s.completion
    out: dict[str, Any] = {
        "index": task.index,
        "content": "",
        "tokens": [],
        "stop": False,
        "id_slot": s.id,
        "tokens_predicted": 0,
        "tokens_evaluated": len(s.prompt_tokens),
        "n_prompt_tokens_cache": s.n_prompt_cached,
        "prompt_progress": {
            "total": len(s.prompt_tokens),
            "cache": s.n_prompt_cached,
            "processed": s.n_prompt_done,
            "time_ms": (now() - s.t_start) * 1e3,
        },
    }
    if task.params.timings_per_token:
        out["timings"] = timings(s)
    return out


def final_payload(s: Slot, stop: StopType, content: str) -> dict[str, Any]:
    task = s.completion
    p = task.params
    out: dict[str, Any] = {
        "index": task.index,
        "content": content,
        "tokens": list(s.generated) if p.return_tokens else [],
        "id_slot": s.id,
        "stop": True,
        "tokens_predicted": len(s.generated),
        "tokens_evaluated": len(s.prompt_tokens),
        "generation_settings": p.settings,
        "prompt": task.prompt_text,
        "has_new_line": "\n" in s.text.text,
        "truncated": s.truncated,
        "stop_type": stop.value,
        "stopping_word": s.text.stopping_word,
        "tokens_cached": len(s.cache_tokens),
        "timings": timings(s),
        "n_prompt_tokens_cache": s.n_prompt_cached,
    }
    if not p.stream and s.probs:
        out["completion_probabilities"] = s.probs
    if p.prompt_logprobs >= 0:
        out["prompt_probabilities"] = s.prompt_probs
    return out
