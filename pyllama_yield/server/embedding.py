"""Embedding tasks: a prompt in, its embedding out (``/embedding``, ``/v1/embeddings``).

The whole prompt goes into one batch (a pooled embedding is computed over the tokens of one
ubatch). With media, each medium goes in through mtmd and the text between them in one batch
each; the pooled vector is then that of the text after the last medium, which attends to the
media before it (as llama-server's). The pooled vector (or, with pooling ``none``, one vector per
token) is normalized as llama-server's ``embd_normalize`` asks: -1 none, 0 max-abs to int16
range, 1 taxicab, 2 euclidean (the default), p > 2 the p-norm.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["EmbeddingTask", "normalize", "rerank_prompt"]


@dataclass
class EmbeddingTask:
    prompt_tokens: list[int]
    index: int = 0
    normalize: int = 2
    cache_prompt: bool = False  # an embedding never reuses a slot's cache
    id_slot: int = -1
    rerank: bool = False  # a (query, document) pair: the answer is the reranker's score
    media: dict[int, Any] = field(default_factory=dict)  # first cell -> mtmd chunk (media.py)


def normalize(v: np.ndarray, norm: int) -> np.ndarray:
    v = v.astype(np.float64)
    if norm < 0:
        return v
    if norm == 0:
        scale = np.abs(v).max() / 32760.0
    elif norm == 2:
        scale = np.sqrt((v * v).sum())
    else:
        scale = (np.abs(v) ** norm).sum() ** (1.0 / norm)
    return v / scale if scale > 0 else v


def rerank_prompt(model: Any, vocab: Any, query: str, document: str) -> list[int]:
    """A (query, document) pair as llama-server feeds it to a reranker: the model's ``rerank``
    template when it has one, else ``[BOS] query [EOS] [SEP] document [EOS]`` as its vocab asks."""
    template = model.chat_template("rerank")
    if template is not None:
        text = template.replace("{query}", query).replace("{document}", document)
        return vocab.tokenize(text, add_special=False, parse_special=True)
    eos = vocab.eos if vocab.eos >= 0 else vocab.sep
    out = [vocab.bos] if vocab.add_bos else []
    out += vocab.tokenize(query, add_special=False, parse_special=False)
    out += [eos] if vocab.add_eos else []
    out += [vocab.sep] if vocab.add_sep else []
    out += vocab.tokenize(document, add_special=False, parse_special=False)
    out += [eos] if vocab.add_eos else []
    return out
