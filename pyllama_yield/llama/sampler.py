"""libllama's sampler chain (the server samples with common's, see ``pyllama_yield.common``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._native import ffi, lib
from .errors import LlamaError, with_cause
from .owner import Owner

if TYPE_CHECKING:
    from .context import Context
    from .vocab import Vocab

__all__ = ["Sampler"]


class Sampler(Owner):
    """A llama.cpp sampler chain. ``Sampler()`` is greedy; see :meth:`from_params`."""

    _what = "sampler"

    def __init__(self, stages: Iterable[Any] | None = None) -> None:
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        super().__init__(chain, lib.llama_sampler_free)  # the chain frees its stages
        for stage in stages if stages is not None else [lib.llama_sampler_init_greedy()]:
            if stage == ffi.NULL:
                raise LlamaError(with_cause("llama.cpp rejected a sampler stage"))
            lib.llama_sampler_chain_add(chain, stage)

    @classmethod
    def from_params(
        cls,
        vocab: Vocab,
        *,
        temperature: float = 0.8,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        seed: int = 0xFFFFFFFF,
        repeat_last_n: int = 64,
        repeat_penalty: float = 1.0,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        grammar: str | None = None,
    ) -> Sampler:
        """The usual llama-server chain; ``temperature <= 0`` means greedy."""
        if repeat_penalty <= 0:
            raise ValueError("repeat_penalty must be > 0")
        stages = []
        if grammar is not None:
            stages.append(lib.llama_sampler_init_grammar(vocab.ptr, grammar.encode(), b"root"))
        if repeat_last_n != 0 and (repeat_penalty != 1.0 or frequency_penalty or presence_penalty):
            stages.append(
                lib.llama_sampler_init_penalties(
                    vocab.n_tokens, repeat_last_n, repeat_penalty, frequency_penalty, presence_penalty
                )
            )
        if temperature <= 0:
            stages.append(lib.llama_sampler_init_greedy())
        else:
            if top_k > 0:
                stages.append(lib.llama_sampler_init_top_k(top_k))
            stages.append(lib.llama_sampler_init_top_p(top_p, 1))
            stages.append(lib.llama_sampler_init_min_p(min_p, 1))
            stages.append(lib.llama_sampler_init_temp(temperature))
            stages.append(lib.llama_sampler_init_dist(seed))
        return cls(stages)

    def sample(self, ctx: Context, idx: int = -1) -> int:
        """Sample from the logits of output ``idx`` and accept the token."""
        return lib.llama_sampler_sample(self.ptr, ctx.ptr, idx)

    def accept(self, token: int) -> None:
        lib.llama_sampler_accept(self.ptr, token)

    def reset(self) -> None:
        lib.llama_sampler_reset(self.ptr)
