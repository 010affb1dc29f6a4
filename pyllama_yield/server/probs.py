"""Token probabilities for ``n_probs`` (llama-server's ``completion_probabilities`` entries).

Two kinds, as in llama-server: before sampling (a softmax over the raw logits of the output,
reported as log-probabilities) and, with ``post_sampling_probs``, after the whole sampler chain
(the candidates the chain left, reported as probabilities).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..llama import Context
    from .slot import Slot

__all__ = ["ProbsEntry", "post_sampling", "pre_sampling", "prompt_chunk_probs", "token_probs", "valid_utf8"]

# llama-server reports log(0) as the lowest float, since JSON has no -infinity
LOWEST_FLOAT = float(np.finfo(np.float32).min)

ProbsEntry = dict[str, Any]


def valid_utf8(piece: bytes) -> str:
    """The text of a token piece, cut before a multi-byte character it splits (as llama-server does)."""
    try:
        return piece.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data":
            return piece[: exc.start].decode("utf-8", "replace")
        return piece.decode("utf-8", "replace")


def _log(p: float) -> float:
    return math.log(p) if p > 0 else LOWEST_FLOAT


def _entry(token: int, piece: bytes, p: float, post: bool) -> ProbsEntry:
    return {
        "id": token,
        "token": valid_utf8(piece),
        "bytes": list(piece),
        **({"prob": p} if post else {"logprob": _log(p)}),
    }


def pre_sampling(logits: np.ndarray, token: int, n: int, piece: Callable[[int], bytes]) -> ProbsEntry:
    """The sampled ``token`` and the ``n`` most likely ones, from the raw logits of its output."""
    shifted = np.exp(logits - logits.max(), dtype=np.float64)
    probs = shifted / shifted.sum()
    n = min(n, probs.size)
    top = np.argpartition(-probs, n - 1)[:n] if n else np.empty(0, dtype=np.int64)
    top = top[np.argsort(-probs[top], kind="stable")]
    return _with_top(token, piece, float(probs[token]), [(int(t), float(probs[t])) for t in top], post=False)


def post_sampling(
    ids: np.ndarray, probs: np.ndarray, p_token: float, token: int, piece: Callable[[int], bytes]
) -> ProbsEntry:
    """The sampled ``token`` and the candidates the sampler chain left (zero probabilities dropped)."""
    top = []
    for t, p in zip(ids.tolist(), probs.tolist(), strict=True):
        if p == 0.0:
            break
        top.append((t, p))
    return _with_top(token, piece, p_token, top, post=True)


def _with_top(
    token: int, piece: Callable[[int], bytes], p: float, top: list[tuple[int, float]], post: bool
) -> ProbsEntry:
    entry = _entry(token, piece(token), p, post)
    entry["top_probs" if post else "top_logprobs"] = [_entry(t, piece(t), q, post) for t, q in top]
    return entry


def token_probs(
    sampler: Any, ctx: Any, idx: int, token: int, params: Any, piece: Callable[[int], bytes]
) -> ProbsEntry | None:
    """The ``completion_probabilities`` entry for ``token`` sampled from output ``idx``, when the
    request asked for ``n_probs`` (a ``common.CommonSampler``, a ``llama.Context``, ``TaskParams``)."""
    if params.n_probs <= 0:
        return None
    if params.post_sampling_probs:
        ids, probs, p_token = sampler.candidates(params.n_probs)
        return post_sampling(ids, probs, p_token, token, piece)
    return pre_sampling(ctx.logits(idx), token, params.n_probs, piece)


def prompt_chunk_probs(ctx: Context, s: Slot, n: int, to_piece: Callable[[int], bytes]) -> list[ProbsEntry]:
    """``prompt_logprobs`` for the ``n`` tokens of slot ``s``'s prompt chunk just decoded (from
    ``s.n_prompt_done``, outputs from ``s.i_batch_first``): how likely each prompt token was after
    the ones before it (the logits at position p rate token p + 1)."""
    n_top = s.completion.params.prompt_logprobs
    start, tokens = s.n_prompt_done, s.prompt_tokens
    return [
        pre_sampling(ctx.logits(s.i_batch_first + j), tokens[start + j + 1], n_top, to_piece)
        for j in range(n)
        if start + j + 1 < len(tokens)
    ]
