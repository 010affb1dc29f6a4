"""Token probabilities for ``n_probs`` (llama-server's ``completion_probabilities`` entries).

Two kinds, as in llama-server: before sampling (a softmax over the raw logits of the output,
reported as log-probabilities) and, with ``post_sampling_probs``, after the whole sampler chain
(the candidates the chain left, reported as probabilities).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..llama import Context

__all__ = ["TokenProb", "post_sampling", "pre_sampling", "prompt_chunk_probs", "token_probs", "valid_utf8"]

# llama-server reports log(0) as the lowest float, since JSON has no -infinity
LOWEST_FLOAT = float(np.finfo(np.float32).min)


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


@dataclass(frozen=True)
class TokenProb:
    """One token's probability: from the raw logits (``post`` False, reported as a log-probability)
    or after the whole sampler chain (``post``, reported as a probability); a sampled token carries
    its alternatives (``top``). ``json()`` is llama-server's ``completion_probabilities`` entry."""

    id: int
    piece: bytes
    p: float
    post: bool = False
    top: tuple[TokenProb, ...] = ()

    @property
    def token(self) -> str:
        return valid_utf8(self.piece)

    @property
    def logprob(self) -> float:
        return _log(self.p)

    def json(self, with_top: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "token": self.token, "bytes": list(self.piece)}
        out.update({"prob": self.p} if self.post else {"logprob": self.logprob})
        if with_top:
            out["top_probs" if self.post else "top_logprobs"] = [t.json(with_top=False) for t in self.top]
        return out


def pre_sampling(logits: np.ndarray, token: int, n: int, piece: Callable[[int], bytes]) -> TokenProb:
    """The sampled ``token`` and the ``n`` most likely ones, from the raw logits of its output."""
    shifted = np.exp(logits - logits.max(), dtype=np.float64)
    probs = shifted / shifted.sum()
    n = min(n, probs.size)
    top = np.argpartition(-probs, n - 1)[:n] if n else np.empty(0, dtype=np.int64)
    top = top[np.argsort(-probs[top], kind="stable")]
    return _with_top(token, piece, float(probs[token]), [(int(t), float(probs[t])) for t in top], post=False)


def post_sampling(
    ids: np.ndarray, probs: np.ndarray, p_token: float, token: int, piece: Callable[[int], bytes]
) -> TokenProb:
    """The sampled ``token`` and the candidates the sampler chain left (zero probabilities dropped)."""
    top = []
    for t, p in zip(ids.tolist(), probs.tolist(), strict=True):
        if p == 0.0:
            break
        top.append((t, p))
    return _with_top(token, piece, p_token, top, post=True)


def _with_top(
    token: int, piece: Callable[[int], bytes], p: float, top: list[tuple[int, float]], post: bool
) -> TokenProb:
    return TokenProb(token, piece(token), p, post, tuple(TokenProb(t, piece(t), q, post) for t, q in top))


def token_probs(
    sampler: Any, ctx: Any, idx: int, token: int, params: Any, piece: Callable[[int], bytes]
) -> TokenProb | None:
    """The ``completion_probabilities`` entry for ``token`` sampled from output ``idx``, when the
    request asked for ``n_probs`` (a ``common.CommonSampler``, a ``llama.Context``, ``TaskParams``)."""
    if params.n_probs <= 0:
        return None
    if params.post_sampling_probs:
        ids, probs, p_token = sampler.candidates(params.n_probs)
        return post_sampling(ids, probs, p_token, token, piece)
    return pre_sampling(ctx.logits(idx), token, params.n_probs, piece)


def prompt_chunk_probs(
    ctx: Context, tokens: list[int], start: int, first_output: int, n: int, n_top: int, to_piece: Callable[[int], bytes]
) -> list[TokenProb]:
    """``prompt_logprobs`` for the ``n`` prompt ``tokens`` from ``start`` just decoded (their
    outputs from ``first_output`` in the batch): how likely each prompt token was after the ones
    before it (the logits at position p rate token p + 1)."""
    return [
        pre_sampling(ctx.logits(first_output + j), tokens[start + j + 1], n_top, to_piece)
        for j in range(n)
        if start + j + 1 < len(tokens)
    ]
