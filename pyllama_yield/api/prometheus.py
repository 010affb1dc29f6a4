"""The metrics snapshot in Prometheus text format, with llama-server's metric names."""

from __future__ import annotations

from typing import Any

__all__ = ["prometheus_text"]


def prometheus_text(m: dict[str, Any]) -> str:
    # the gauges cover the window since the previous scrape, in decode steps (llama-server's buckets)
    w_prompt, w_gen = m["prompt_seconds_window"], m["predicted_seconds_window"]
    prompt_rate = m["prompt_steps"] / w_prompt if w_prompt else 0.0
    gen_rate = m["predicted_steps"] / w_gen if w_gen else 0.0
    metrics = [
        ("counter", "prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens",
         m["prompt_tokens"]),
        ("counter", "prompt_tokens_cached_total", "Number of prompt tokens reused from the cache",
         m["prompt_tokens_cached"]),
        ("counter", "prompt_seconds_total", "Total time spent processing prompts", m["prompt_seconds"]),
        ("counter", "tokens_predicted_total", "Number of generation tokens processed", m["predicted_tokens"]),
        ("counter", "tokens_predicted_seconds_total", "Total time spent generating tokens", m["predicted_seconds"]),
        ("counter", "n_decode_total", "Total number of llama_decode() calls", m["n_decode"]),
        ("counter", "n_tokens_max", "Largest observed sequence length (prompt + generation)", m["n_tokens_max"]),
        ("counter", "spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated",
         m["draft_tokens"]),
        ("counter", "spec_decode_num_accepted_tokens_total",
         "Speculative: Total draft tokens accepted by the target model", m["draft_accepted"]),
        ("counter", "spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps",
         m["draft_steps"]),
        ("counter", "requests_finished_total", "Number of finished requests", m["requests_finished"]),
        ("counter", "requests_failed_total", "Number of failed requests", m["requests_failed"]),
        ("gauge", "prompt_tokens_seconds", "Average prompt throughput in tokens/s", prompt_rate),
        ("gauge", "predicted_tokens_seconds", "Average generation throughput in tokens/s", gen_rate),
        ("gauge", "requests_processing", "Number of requests processing", m["requests_processing"]),
        ("gauge", "requests_deferred", "Number of requests deferred", m["requests_deferred"]),
        ("gauge", "n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call",
         m["n_busy_slots"] / max(m["n_decode"], 1)),
    ]  # fmt: skip
    lines = []
    for kind, name, help_text, value in metrics:
        lines += [f"# HELP llamacpp:{name} {help_text}", f"# TYPE llamacpp:{name} {kind}", f"llamacpp:{name} {value}"]
    # ours: where the loop thread's time went (decode with its sync, batch fill, sampling, ...)
    name = "pyllama_yield:loop_seconds_total"
    lines += [f"# HELP {name} Seconds of the loop thread's steps, by phase", f"# TYPE {name} counter"]
    lines += [f'{name}{{phase="{phase}"}} {s}' for phase, s in m.get("loop_seconds", {}).items()]
    # ours, for many users and for a gateway that picks a replica by its load
    name = "pyllama_yield:requests_waiting"
    lines += [f"# HELP {name} Requests waiting for a slot, by priority (lower is sooner)", f"# TYPE {name} gauge"]
    by_priority = m.get("requests_waiting_by_priority") or {0: 0}
    lines += [f'{name}{{priority="{p}"}} {n}' for p, n in sorted(by_priority.items())]
    name = "pyllama_yield:kv_cache_usage_ratio"
    usage = m.get("kv_cache_tokens", 0) / m["n_ctx"] if m.get("n_ctx") else 0.0
    lines += [f"# HELP {name} Share of the KV cache's cells the slots hold (0-1)", f"# TYPE {name} gauge"]
    lines += [f"{name} {usage}"]
    return "\n".join(lines) + "\n"
