"""The fill-in-the-middle prompt of ``/infill``: llama-server's repo-level FIM layout.

    [FIM_REP]myproject\\n [FIM_SEP]file0\\n chunk0 ... [FIM_SEP]filename\\n
    [FIM_PRE]prefix prompt [FIM_SUF]suffix [FIM_MID]

Extra context fills what the batch and the expected answer leave; the prefix keeps 3/4 of a
batch, the suffix the rest (the ratio llama-server uses).
"""

from __future__ import annotations

from typing import Any

from ..llama import Vocab

__all__ = ["fim_support_error", "infill_prompt"]

# a chunk separator for vocabs without FIM_SEP ("\n\n--- snippet ---\n\n")
CHUNK_SEPARATOR = "\n\n--- snippet ---\n\n"


def fim_support_error(vocab: Vocab) -> str | None:
    missing = [
        f"{name} token is missing."
        for kind, name in (("pre", "prefix"), ("suf", "suffix"), ("mid", "middle"))
        if vocab.fim(kind) < 0
    ]
    return f"Infill is not supported by this model: {' '.join(missing)} " if missing else None


def _tokens(vocab: Vocab, value: Any) -> list[int]:
    """A string, or a list mixing strings and token ids, without special parsing."""
    if isinstance(value, str):
        return vocab.tokenize(value, add_special=False, parse_special=False)
    out: list[int] = []
    for part in value:
        out += vocab.tokenize(part, add_special=False, parse_special=False) if isinstance(part, str) else [int(part)]
    return out


def infill_prompt(
    vocab: Vocab,
    input_prefix: Any,
    input_suffix: Any,
    input_extra: list[dict[str, str]],
    prompt_tokens: list[int],
    *,
    n_batch: int,
    n_predict: int,
    n_ctx: int,
    spm_infill: bool = False,
) -> list[int]:
    prefix, suffix = _tokens(vocab, input_prefix), _tokens(vocab, input_suffix)
    extra: list[int] = []
    rep, sep = vocab.fim("rep"), vocab.fim("sep")
    if rep >= 0:
        extra += [rep, *_tokens(vocab, "myproject\n")]
    for chunk in input_extra:
        if sep >= 0:
            extra += [sep, *_tokens(vocab, chunk.get("filename", "tmp") + "\n")]
        else:
            extra += _tokens(vocab, CHUNK_SEPARATOR)
        extra += _tokens(vocab, chunk.get("text", ""))
    if sep >= 0:
        extra += [sep, *_tokens(vocab, "filename\n")]

    n_prefix = min(len(prefix), 3 * (n_batch // 4))
    n_suffix = min(len(suffix), max(0, n_batch // 4 - (2 + len(prompt_tokens))))
    n_extra = min(max(0, n_ctx - n_batch - 2 * n_predict), len(extra))
    prefix = [vocab.fim("pre"), *prefix[len(prefix) - n_prefix :], *prompt_tokens]
    suffix = [vocab.fim("suf"), *suffix[:n_suffix]]
    first, last = (suffix, prefix) if spm_infill else (prefix, suffix)
    if vocab.add_bos:
        first = [vocab.bos, *first]
    return [*extra[len(extra) - n_extra :], *first, *last, vocab.fim("mid")]
