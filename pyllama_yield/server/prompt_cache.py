"""Prompt caching beyond a slot's common prefix: ports of llama-server's two mechanisms.

- Chunk reuse (``--cache-reuse``): after the common prefix, every run of at least ``n_min`` tokens
  that the slot's cache and the new prompt share is shifted in the KV cache to where the prompt
  has it, instead of being computed again (e.g. a chat whose middle was edited). What lies between
  reused chunks is dropped.
- The host-memory prompt cache (``--cache-ram``): :class:`PromptCache`.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from ..llama import Context
from .slot import Checkpoint, common_prefix

__all__ = ["CachedPrompt", "PromptCache", "reuse_chunks"]

log = logging.getLogger("pyllama_yield.server")


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


@dataclass(eq=False)  # entries are told apart by identity (removing one compares them)
class CachedPrompt:
    tokens: list[int]
    target: bytearray  # the sequence's state in the target context
    draft: bytearray  # and in the draft model's context (empty without one)
    lora: tuple[float, ...] = ()  # the LoRA scales it was computed with
    checkpoints: list[Checkpoint] = field(default_factory=list)  # the slot's, taken along
    # set once cached: its bytes (the cache keeps running totals), its place in the sorted index
    # and in the order of saving
    size: int = field(init=False, default=0)
    key: tuple[int, ...] = field(init=False, default=())
    serial: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.size = len(self.target) + len(self.draft) + sum(len(c.data) for c in self.checkpoints)
        self.key = tuple(self.tokens)


class PromptCache:
    """Prompts kept in host memory (``--cache-ram`` MiB; llama-server's server_prompt_cache).

    A slot about to take a task it shares little with saves its prompt here, then loads the cached
    prompt that best fits the task, so the conversation a client comes back to does not have to be
    evaluated again. Oldest entries go first when the size limit, or the token limit (the context
    size, raised while the entries are small), is reached. Loop thread only.

    Every distinct prompt a client sends may stay here (8 GiB hold hundreds of thousands of small
    ones), and each task start asks what the cache holds. llama-server looks through every entry
    in C++; a Python loop over them costs more than the prompt's evaluation after a few hundred
    requests. So the entries are also kept sorted by their tokens, where the questions become
    binary searches: no entry is ever a prefix of another (a prompt that one contains is not
    saved; one that contains others replaces them), so the entries that start with given tokens
    are a run of neighbours, and the one that a prompt starts with, if any, is its predecessor.
    """

    def __init__(self, limit_mib: int, limit_tokens: int) -> None:
        self.limit_bytes = max(limit_mib, 0) * 1024 * 1024  # 0: no limit (-1 on the command line)
        self.limit_tokens = limit_tokens
        self.states: list[CachedPrompt] = []  # oldest first; changed only through _keep/_drop
        # (key, serial, entry) in key order; the serial (unique) settles ties before an entry is compared
        self._sorted: list[tuple[tuple[int, ...], int, CachedPrompt]] = []
        self._serial = 0
        self._size = 0
        self._n_tokens = 0

    def size(self) -> int:
        return self._size

    def n_tokens(self) -> int:
        return self._n_tokens

    def _keep(self, entry: CachedPrompt) -> None:
        self._serial += 1
        entry.serial = self._serial
        self.states.append(entry)
        bisect.insort(self._sorted, (entry.key, entry.serial, entry))
        self._size += entry.size
        self._n_tokens += len(entry.tokens)

    def _drop(self, entry: CachedPrompt) -> None:
        self.states.remove(entry)
        del self._sorted[bisect.bisect_left(self._sorted, (entry.key, entry.serial))]
        self._size -= entry.size
        self._n_tokens -= len(entry.tokens)

    def _starting_with(self, prefix: tuple[int, ...]) -> list[CachedPrompt]:
        """The entries whose tokens start with ``prefix``, oldest first."""
        found = []
        for i in range(bisect.bisect_left(self._sorted, (prefix,)), len(self._sorted)):
            key, _, entry = self._sorted[i]
            if key[: len(prefix)] != prefix:
                break
            found.append(entry)
        return sorted(found, key=lambda e: e.serial)

    def holds(self, tokens: list[int]) -> bool:
        """Whether a cached prompt starts with all of ``tokens``."""
        return self._holds(tuple(tokens))

    def _holds(self, key: tuple[int, ...]) -> bool:
        i = bisect.bisect_left(self._sorted, (key,))
        return i < len(self._sorted) and self._sorted[i][0][: len(key)] == key

    def _prefix_of(self, key: tuple[int, ...]) -> CachedPrompt | None:
        """The entry that ``key`` starts with (there is at most one), if any."""
        i = bisect.bisect_right(self._sorted, (key, self._serial + 1)) - 1
        if i >= 0 and key[: len(self._sorted[i][0])] == self._sorted[i][0]:
            return self._sorted[i][2]
        return None

    def save(
        self,
        tokens: list[int],
        measure: Callable[[], int],
        read: Callable[[], tuple[bytearray, bytearray]],
        lora: tuple[float, ...] = (),
        checkpoints: list[Checkpoint] | None = None,
    ) -> bool:
        """Keep ``tokens`` with the state ``read()`` gives (``measure()`` bytes, asked only once
        the tokens are known to be new: llama.cpp sizes a state by walking its cells); False
        when they are cached already or cannot fit."""
        key = tuple(tokens)
        if not key or self._holds(key):
            return False
        size = measure()
        if self.limit_bytes and size > self.limit_bytes:
            log.warning("prompt state of %.1f MiB exceeds --cache-ram: not cached", size / 2**20)
            return False
        # what the new prompt contains is obsolete; then make room, oldest first
        contained = self._prefix_of(key)
        if contained is not None:
            self._drop(contained)
        while self.states and self.limit_bytes and self._size + size > self.limit_bytes:
            self._drop(self.states[0])
        target, draft = read()
        self._keep(CachedPrompt(list(tokens), target, draft, lora, list(checkpoints or [])))
        return True

    def take_best(self, current: list[int], new: list[int]) -> CachedPrompt | None:
        """The cached prompt that fits ``new`` better than the slot's ``current`` one, both in the
        share of the cached prompt kept and in the share of ``new`` covered; removed from the cache.
        A cached prompt that would keep less than a quarter of itself is left alone."""
        lcp = common_prefix(current, new)
        f_keep = lcp / len(current) if current else -1.0  # an empty slot: any entry is better
        f_sim = lcp / len(new) if new else 0.0
        if lcp >= len(new):
            return None  # nothing can cover more of it
        best = None
        # only an entry that shares more of ``new`` than the slot does can win: those sharing its
        # first lcp + 1 tokens, looked at in the order llama-server looks at them (oldest first)
        for s in self._starting_with(tuple(new[: lcp + 1])):
            n = common_prefix(s.tokens, new)
            keep, sim = n / len(s.tokens), n / len(new)
            if keep >= 0.25 and keep > f_keep and sim > f_sim:
                best, f_keep, f_sim = s, keep, sim
        if best is not None:
            self._drop(best)
        return best

    def update(self) -> None:
        """Apply the limits: the size one, then the token one (raised as far as the size limit
        allows at the entries' average size per token)."""
        while self.states and self.limit_bytes and self._size > self.limit_bytes:
            self._drop(self.states[0])
        per_token = max(1.0, self._size / max(1, self._n_tokens))
        limit = max(self.limit_tokens, int(self.limit_bytes / per_token)) if self.limit_bytes else self.limit_tokens
        while self.states and limit and self._n_tokens > limit:
            self._drop(self.states[0])
