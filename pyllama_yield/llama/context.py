"""A ``llama_context``: its parameters and thread pools, decode, outputs and memory."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .._native import backend_function, ffi, lib, take_recent_problems
from .batch import Batch
from .errors import DecodeAbortedError, DecodeError, InvalidBatchError, LlamaError, NoKvSlotError, with_cause
from .model import Model
from .owner import Owner
from .state import ContextState

__all__ = ["Context"]

_FLASH_ATTN = {
    "auto": "LLAMA_FLASH_ATTN_TYPE_AUTO",
    "on": "LLAMA_FLASH_ATTN_TYPE_ENABLED",
    "off": "LLAMA_FLASH_ATTN_TYPE_DISABLED",
}


_POOLING = ("none", "mean", "cls", "last", "rank")


def _ggml_type(name: str) -> int:
    value = getattr(lib, f"GGML_TYPE_{name.upper()}", None)
    if value is None:
        raise ValueError(f"unknown ggml type {name!r} (e.g. 'f16', 'q8_0')")
    return value


def _attach_threadpools(ctx: Any, n_threads: int, n_threads_batch: int, poll: int) -> tuple[Any, ...]:
    """Give the context persistent CPU thread pools, as llama-server does (common_threadpools).

    Without them ggml starts and joins its threads for every graph, i.e. every decode; a pool's
    threads stay and poll briefly (``poll`` 0-100) for the next graph. The generation pool starts
    paused when prompts get a pool of their own. With OpenMP (ggml's default build on Linux) the
    threads are OpenMP's team and ``poll`` is unused: how long they spin between graphs is
    libgomp's to decide (``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``)."""
    if not 0 <= poll <= 100:
        raise ValueError(f"poll must be within 0..100, got {poll}")
    params = lib.ggml_threadpool_params_default(n_threads)
    params.poll = poll
    batch_params = lib.ggml_threadpool_params_default(n_threads_batch)
    batch_params.poll = poll
    # ggml-cpu.h's functions: in the CPU backend, a module of its own in a wheel (GGML_BACKEND_DL)
    threadpool_new = backend_function("ggml_threadpool_new", "CPU")
    threadpool_free = backend_function("ggml_threadpool_free", "CPU")
    pools: list[Any] = []
    batch_pool = ffi.NULL
    if not lib.ggml_threadpool_params_match(ffi.addressof(params), ffi.addressof(batch_params)):
        batch_pool = threadpool_new(ffi.addressof(batch_params))
        if batch_pool == ffi.NULL:
            return ()  # ggml falls back to threads per graph
        pools.append(batch_pool)
        params.paused = True
    pool = threadpool_new(ffi.addressof(params))
    if pool == ffi.NULL:
        for p in pools:
            threadpool_free(p)
        return ()
    pools.append(pool)
    lib.llama_attach_threadpool(ctx, pool, batch_pool)
    return tuple(pools)


def _free_context(ctx: Any, pools: tuple[Any, ...]) -> None:
    lib.llama_free(ctx)  # first: the context may still hold the pools
    if pools:
        threadpool_free = backend_function("ggml_threadpool_free", "CPU")
        for pool in pools:
            threadpool_free(pool)


def _context_params(
    *,
    n_ctx: int,
    n_batch: int,
    n_ubatch: int,
    n_seq_max: int,
    n_threads: int | None,
    n_threads_batch: int | None,
    flash_attn: str,
    type_k: str | None,
    type_v: str | None,
    embeddings: bool,
    pooling: str | None,
    kv_unified: bool | None,
    swa_full: bool,
) -> Any:
    """``llama_context_params`` from :class:`Context`'s arguments, each checked here (llama.cpp
    asserts or misbehaves on some of them)."""
    for name, value in (("n_ctx", n_ctx), ("n_batch", n_batch), ("n_ubatch", n_ubatch)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    if n_seq_max < 1:
        raise ValueError(f"n_seq_max must be >= 1, got {n_seq_max}")
    if flash_attn not in _FLASH_ATTN:
        raise ValueError(f"flash_attn must be one of {sorted(_FLASH_ATTN)}")
    params = lib.llama_context_default_params()
    params.n_ctx = n_ctx
    params.n_batch = n_batch
    params.n_ubatch = min(n_ubatch, n_batch) if n_batch else n_ubatch
    params.n_seq_max = n_seq_max
    threads = n_threads if n_threads is not None else max(1, (os.cpu_count() or 1))
    params.n_threads = threads
    params.n_threads_batch = n_threads_batch if n_threads_batch is not None else threads
    params.flash_attn_type = getattr(lib, _FLASH_ATTN[flash_attn])
    if type_k:
        params.type_k = _ggml_type(type_k)
    if type_v:
        params.type_v = _ggml_type(type_v)
    params.embeddings = embeddings
    if pooling is not None:  # the model's own otherwise
        if pooling not in _POOLING:
            raise ValueError(f"pooling must be one of {sorted(_POOLING)}, got {pooling!r}")
        params.pooling_type = getattr(lib, f"LLAMA_POOLING_TYPE_{pooling.upper()}")
    params.swa_full = swa_full
    if kv_unified is not None:  # llama.cpp's default otherwise
        params.kv_unified = kv_unified
    return params


class Context(Owner, ContextState):
    """A ``llama_context``: KV cache, decode, logits. Keeps its model alive."""

    _what = "context"

    def __init__(
        self,
        model: Model,
        *,
        n_ctx: int = 0,
        n_batch: int = 512,
        n_ubatch: int = 512,
        n_seq_max: int = 1,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        flash_attn: str = "auto",
        type_k: str | None = None,
        type_v: str | None = None,
        embeddings: bool = False,
        pooling: str | None = None,
        kv_unified: bool | None = None,
        swa_full: bool = False,
        poll: int = 50,
    ) -> None:
        params = _context_params(
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_ubatch=n_ubatch,
            n_seq_max=n_seq_max,
            n_threads=n_threads,
            n_threads_batch=n_threads_batch,
            flash_attn=flash_attn,
            type_k=type_k,
            type_v=type_v,
            embeddings=embeddings,
            pooling=pooling,
            kv_unified=kv_unified,
            swa_full=swa_full,
        )
        # Abort support without the GIL: a C callback reads this int, any thread may set it.
        self._abort_flag = ffi.new("int *", 0)
        params.abort_callback = lib.pyllama_abort_on_flag
        params.abort_callback_data = self._abort_flag
        take_recent_problems()
        ptr = lib.llama_init_from_model(model.ptr, params)
        if ptr == ffi.NULL:
            raise LlamaError(with_cause(f"llama.cpp could not create a context for {model.path}"))
        pools = _attach_threadpools(ptr, params.n_threads, params.n_threads_batch, poll)
        super().__init__(ptr, functools.partial(_free_context, pools=pools))
        self.model = model  # keeps the model alive as long as the context
        self.n_vocab = model.n_vocab
        self._mem = lib.llama_get_memory(ptr)
        self._n_batch = lib.llama_n_batch(ptr)  # fixed at creation; decode checks it every step
        self._decode_lock = threading.Lock()

    @property
    def n_ctx(self) -> int:
        return lib.llama_n_ctx(self.ptr)

    @property
    def n_ctx_seq(self) -> int:
        """The context one sequence can use (all of it with a unified KV cache)."""
        return lib.llama_n_ctx_seq(self.ptr)

    @property
    def n_batch(self) -> int:
        self.ptr  # noqa: B018 - raises if closed
        return self._n_batch

    @property
    def n_seq_max(self) -> int:
        return lib.llama_n_seq_max(self.ptr)

    @property
    def n_threads(self) -> int:
        """The threads a generation step computes on (``n_threads_batch`` for prompts)."""
        return lib.llama_n_threads(self.ptr)

    # decode --------------------------------------------------------------------------------
    def decode(self, batch: Batch) -> None:
        """One ``llama_decode`` (GIL released); return codes become exceptions."""
        self.decode_with(batch, lib.llama_decode)

    def decode_with(self, batch: Batch, decode: Callable[[Any, Any], int]) -> None:
        """:meth:`decode` through ``decode(ctx_ptr, batch_ptr)``, a C call that decodes as
        ``llama_decode`` does and returns its code, doing more in the same call (the common
        shim's decode-and-sample): checked and guarded the same way."""
        ctx = self.ptr
        n = batch.n_tokens
        if n == 0:
            raise InvalidBatchError("empty batch", -1)
        if n > self.n_batch:  # llama.cpp asserts (aborts the process) on this
            raise InvalidBatchError(f"batch of {n} tokens exceeds n_batch={self.n_batch}", -1)
        raw = batch.struct
        take_recent_problems()
        with self._decode_lock:
            code = decode(ctx, raw)
        if code == 0:
            return
        if code == 1:
            raise NoKvSlotError(with_cause(f"no KV cache slot for a batch of {n} tokens (n_ctx={self.n_ctx})"), 1)
        if code == 2:
            self._abort_flag[0] = 0
            raise DecodeAbortedError("decode aborted", 2)
        if code == -1:
            raise InvalidBatchError(with_cause("invalid batch"), -1)
        raise DecodeError(with_cause(f"llama_decode failed with code {code}"), code)

    def warmup(self) -> None:
        """llama.cpp's warm-up run (``common_init_from_params``): decode BOS and EOS once, so the
        first request does not pay for paging in the weights and sizing compute buffers, then
        forget it. Skipped for encoder models (none is served here)."""
        if lib.llama_model_has_encoder(self.model.ptr) or not lib.llama_model_has_decoder(self.model.ptr):
            return
        vocab = self.model.vocab
        tokens = [t for t in (vocab.bos, vocab.eos) if t >= 0] or [0]  # -1: no such token
        batch = Batch(len(tokens))
        try:
            batch.add_sequence(tokens[: self.n_batch], 0, 0, logits_last=True)
            self.decode(batch)
        finally:
            batch.close()
        self.memory_clear(True)
        self.synchronize()
        lib.llama_perf_context_reset(self.ptr)

    def abort(self) -> None:
        """Interrupt the decode in progress (or the next one); safe from any thread."""
        self._abort_flag[0] = 1

    def synchronize(self) -> None:
        lib.llama_synchronize(self.ptr)

    # outputs -------------------------------------------------------------------------------
    def logits(self, i: int = -1, *, copy: bool = False) -> np.ndarray:
        """Logits of batch token ``i`` (which asked for logits; negative counts outputs from the
        end) as a zero-copy view.

        The view is valid until the next decode on this context; pass ``copy=True`` to keep it.
        """
        ptr = lib.llama_get_logits_ith(self.ptr, i)
        if ptr == ffi.NULL:
            raise IndexError(with_cause(f"no logits for output {i}"))
        view = np.frombuffer(ffi.buffer(ptr, 4 * self.n_vocab), dtype=np.float32)
        return view.copy() if copy else view

    def embeddings(self, i: int = -1, *, copy: bool = False) -> np.ndarray:
        ptr = lib.llama_get_embeddings_ith(self.ptr, i)
        if ptr == ffi.NULL:
            raise IndexError(with_cause(f"no embeddings for output {i} (create the context with embeddings=True)"))
        view = np.frombuffer(ffi.buffer(ptr, 4 * self.n_embd_out), dtype=np.float32)
        return view.copy() if copy else view

    def embeddings_seq(self, seq_id: int) -> np.ndarray:
        """The pooled embedding of sequence ``seq_id`` (a copy), for a context that pools; with
        ``rank`` pooling, the classifier's scores (one for a reranker)."""
        ptr = lib.llama_get_embeddings_seq(self.ptr, seq_id)
        if ptr == ffi.NULL:
            raise IndexError(with_cause(f"no pooled embedding for sequence {seq_id}"))
        n = max(1, lib.llama_model_n_cls_out(self.model.ptr)) if self.pooling == "rank" else self.n_embd_out
        return np.frombuffer(ffi.buffer(ptr, 4 * n), dtype=np.float32).copy()

    @property
    def n_embd_out(self) -> int:
        return lib.llama_model_n_embd_out(self.model.ptr)

    @property
    def pooling(self) -> str:
        """How embeddings are pooled: none, mean, cls, last or rank."""
        return _POOLING[lib.llama_pooling_type(self.ptr)]

    # memory (KV cache) ---------------------------------------------------------------------
    def memory_clear(self, data: bool = True) -> None:
        self.ptr  # noqa: B018 - raises if closed
        lib.llama_memory_clear(self._mem, data)

    def seq_rm(self, seq_id: int, p0: int = -1, p1: int = -1) -> bool:
        self.ptr  # noqa: B018
        return bool(lib.llama_memory_seq_rm(self._mem, seq_id, p0, p1))

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        self.ptr  # noqa: B018
        lib.llama_memory_seq_cp(self._mem, src, dst, p0, p1)

    @property
    def can_shift(self) -> bool:
        """Whether positions in the KV cache can be shifted (``seq_add``) for this model."""
        self.ptr  # noqa: B018
        return bool(lib.llama_memory_can_shift(self._mem))

    def seq_add(self, seq_id: int, p0: int, p1: int, delta: int) -> None:
        self.ptr  # noqa: B018
        lib.llama_memory_seq_add(self._mem, seq_id, p0, p1, delta)

    def seq_pos_max(self, seq_id: int) -> int:
        self.ptr  # noqa: B018
        return lib.llama_memory_seq_pos_max(self._mem, seq_id)

    def seq_pos_min(self, seq_id: int) -> int:
        """The smallest position the memory still holds for ``seq_id`` (-1: none): above 0 once a
        sliding window has dropped the oldest cells."""
        self.ptr  # noqa: B018
        return lib.llama_memory_seq_pos_min(self._mem, seq_id)
