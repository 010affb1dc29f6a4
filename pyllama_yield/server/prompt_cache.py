"""Reusing a slot's KV cache for a new prompt beyond their common prefix (``--cache-reuse``).

A port of llama-server's chunk reuse: after the common prefix, every run of at least ``n_min``
tokens that the cache and the prompt share is shifted in the KV cache to where the prompt has it,
instead of being computed again (e.g. a chat whose middle was edited, a document re-sent after a
changed header). What lies between reused chunks is dropped.
"""

from __future__ import annotations

from ..llama import Context

__all__ = ["reuse_chunks"]


def reuse_chunks(ctx: Context, seq_id: int, cache: list[int], prompt: list[int], n_past: int, n_min: int) -> int:
    """Shift the KV of the chunks of ``cache`` (the tokens sequence ``seq_id`` holds) that ``prompt``
    repeats after the first ``n_past`` tokens; returns the new number of prompt tokens the cache
    holds in place. ``ctx`` must be able to shift (``Context.can_shift``)."""
    head_c = head_p = n_past  # where we are in the cache, and in the prompt (head_p <= head_c)
    while head_c < len(cache) and head_p < len(prompt):
        n_match = 0
        while (
            head_c + n_match < len(cache)
            and head_p + n_match < len(prompt)
            and cache[head_c + n_match] == prompt[head_p + n_match]
        ):
            n_match += 1
        if n_match < n_min:
            head_c += 1
            continue
        ctx.seq_rm(seq_id, head_p, head_c)  # what the prompt skipped
        ctx.seq_add(seq_id, head_c, head_c + n_match, head_p - head_c)  # the chunk, moved back
        head_c += n_match
        head_p += n_match
        n_past = head_p
    return n_past
