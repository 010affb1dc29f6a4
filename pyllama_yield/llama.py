"""A thin Pythonic layer over the binding: owners of llama.cpp objects, not wrappers of everything.

Each owner frees its C object exactly once (``close()``, context manager, or a finalizer as a
backstop), refuses use after close, and keeps alive what it depends on (a context its model).
Every call into llama.cpp is one cffi call, which releases the GIL: ``Context.decode`` lets other
Python threads run while ggml computes.
"""

from __future__ import annotations

import functools
import os
import struct
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._native import ffi, lib, take_recent_problems

__all__ = [
    "Batch",
    "ClosedError",
    "Context",
    "DecodeAbortedError",
    "DecodeError",
    "InvalidBatchError",
    "LlamaError",
    "Model",
    "ModelLoadError",
    "NoKvSlotError",
    "Sampler",
    "Vocab",
]


class LlamaError(RuntimeError):
    """A llama.cpp call failed; the message carries llama.cpp's own reason when it logged one."""


class ModelLoadError(LlamaError):
    pass


class ClosedError(LlamaError):
    pass


class DecodeError(LlamaError):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class NoKvSlotError(DecodeError):
    """``llama_decode`` returned 1: no room in the KV cache for the batch."""


class DecodeAbortedError(DecodeError):
    """``llama_decode`` returned 2: the abort callback stopped it."""


class InvalidBatchError(DecodeError):
    """``llama_decode`` returned -1 (or the batch was rejected before reaching C)."""


def _with_cause(message: str) -> str:
    """``message`` with what llama.cpp logged since the call began: the first problem is the root
    cause (e.g. which GGUF field is bad), the last one what gave up."""
    problems = [p.strip() for p in take_recent_problems()]
    if not problems:
        return message
    return f"{message}: {problems[0]}" + (f" ({problems[-1]})" if len(problems) > 1 else "")


class _Owner:
    """Owns one C object; ``_free`` is called exactly once."""

    _what = "object"

    def __init__(self, ptr: Any, free: Callable[[Any], None]) -> None:
        self._ptr = ptr
        self._finalizer = weakref.finalize(self, free, ptr)

    @property
    def ptr(self) -> Any:
        """The raw cdata pointer, for calls into ``lib`` that this layer does not wrap."""
        if not self._finalizer.alive:
            raise ClosedError(f"{self._what} is closed")
        return self._ptr

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        self._finalizer()

    def __enter__(self):  # noqa: ANN204 - returns the subclass
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- model ------------------------------------------------------------------------------------
_GGUF_HEADER = struct.Struct("<4sIQQ")  # magic, version, n_tensors, n_kv


def check_gguf_file(path: Path) -> None:
    """Reject what llama.cpp would choke on, with the path and the cause, before C sees it."""
    if not path.exists():
        raise FileNotFoundError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelLoadError(f"model path is not a file: {path}")
    size = path.stat().st_size
    if size < _GGUF_HEADER.size:
        raise ModelLoadError(f"not a GGUF model: {path} ({size} bytes, shorter than a GGUF header)")
    with path.open("rb") as f:
        magic, version, _, _ = _GGUF_HEADER.unpack(f.read(_GGUF_HEADER.size))
    if magic != b"GGUF":
        raise ModelLoadError(f"not a GGUF model: {path} (magic {magic!r}, expected b'GGUF')")
    if version not in (2, 3):
        raise ModelLoadError(f"unsupported GGUF version {version} in {path}")


@ffi.def_extern()
def _pyllama_progress_callback(progress: float, user_data: Any) -> bool:
    callback = ffi.from_handle(user_data)
    try:
        return callback(progress) is not False
    except Exception:  # an exception cannot cross C; stop loading instead
        return False


class Model(_Owner):
    """A loaded GGUF model (``llama_model``)."""

    _what = "model"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        n_gpu_layers: int = 0,
        use_mmap: bool = True,
        use_mlock: bool = False,
        vocab_only: bool = False,
        devices: Sequence[str] | None = None,
        tensor_split: Sequence[float] = (),
        progress: Callable[[float], object] | None = None,
    ) -> None:
        """``tensor_split``: the share of the model each device takes, in device order (llama.cpp's
        ``--tensor-split``; empty: by each device's free memory)."""
        self.path = Path(path)
        check_gguf_file(self.path)
        params = lib.llama_model_default_params()
        params.n_gpu_layers = n_gpu_layers
        modes = {
            (True, False): lib.LLAMA_LOAD_MODE_MMAP,
            (False, False): lib.LLAMA_LOAD_MODE_NONE,
            (True, True): lib.LLAMA_LOAD_MODE_MMAP_MLOCK,
            (False, True): lib.LLAMA_LOAD_MODE_MLOCK,
        }
        params.load_mode = modes[(use_mmap, use_mlock)]
        params.vocab_only = vocab_only
        keep: list[Any] = []
        if devices is not None:
            devs = ffi.new("ggml_backend_dev_t[]", len(devices) + 1)
            for i, name in enumerate(devices):
                dev = lib.ggml_backend_dev_by_name(name.encode())
                if dev == ffi.NULL:
                    raise ValueError(f"unknown device {name!r}; see pyllama_yield.backends()")
                devs[i] = dev
            params.devices = devs
            keep.append(devs)
        if tensor_split:
            n_max = lib.llama_max_devices()
            if len(tensor_split) > n_max:
                raise ValueError(f"tensor_split has {len(tensor_split)} entries; llama.cpp takes at most {n_max}")
            split = ffi.new("float[]", [float(x) for x in tensor_split] + [0.0] * (n_max - len(tensor_split)))
            params.tensor_split = split
            keep.append(split)
        if progress is not None:
            handle = ffi.new_handle(progress)
            keep.append(handle)
            params.progress_callback = lib._pyllama_progress_callback
            params.progress_callback_user_data = handle
        take_recent_problems()
        ptr = lib.llama_model_load_from_file(os.fsencode(self.path), params)
        if ptr == ffi.NULL:
            raise ModelLoadError(_with_cause(f"llama.cpp could not load {self.path}"))
        super().__init__(ptr, lib.llama_model_free)
        self.vocab = Vocab(self)

    @property
    def n_ctx_train(self) -> int:
        return lib.llama_model_n_ctx_train(self.ptr)

    @property
    def n_swa(self) -> int:
        """Positions a sliding-window attention layer sees (0: the model has none)."""
        return lib.llama_model_n_swa(self.ptr)

    @property
    def has_recurrent_state(self) -> bool:
        """A recurrent or hybrid model: part of its memory cannot be rolled back to a position."""
        return bool(lib.llama_model_is_recurrent(self.ptr) or lib.llama_model_is_hybrid(self.ptr))

    @property
    def n_embd(self) -> int:
        return lib.llama_model_n_embd(self.ptr)

    @property
    def n_layer(self) -> int:
        return lib.llama_model_n_layer(self.ptr)

    @property
    def size(self) -> int:
        """Bytes of all the model's tensors."""
        return lib.llama_model_size(self.ptr)

    @property
    def n_params(self) -> int:
        return lib.llama_model_n_params(self.ptr)

    @property
    def n_vocab(self) -> int:
        return self.vocab.n_tokens

    def description(self) -> str:
        buf = ffi.new("char[]", 256)
        lib.llama_model_desc(self.ptr, buf, len(buf))
        return ffi.string(buf).decode("utf-8", "replace")

    def metadata(self) -> dict[str, str]:
        """All GGUF key/value metadata, values as llama.cpp renders them."""
        out = {}
        for i in range(lib.llama_model_meta_count(self.ptr)):
            key = _read_string(functools.partial(lib.llama_model_meta_key_by_index, self.ptr, i))
            out[key] = _read_string(functools.partial(lib.llama_model_meta_val_str_by_index, self.ptr, i))
        return out

    def chat_template(self, name: str | None = None) -> str | None:
        ptr = lib.llama_model_chat_template(self.ptr, name.encode() if name else ffi.NULL)
        return None if ptr == ffi.NULL else ffi.string(ptr).decode()

    def apply_chat_template(self, messages: Sequence[dict[str, str]], add_assistant: bool = True) -> str:
        """Format messages with the model's chat template (ChatML when the GGUF has none)."""
        return apply_chat_template(self.chat_template() or "chatml", messages, add_assistant)


def apply_chat_template(template: str, messages: Sequence[dict[str, str]], add_assistant: bool = True) -> str:
    """Format ``[{"role", "content"}, ...]`` with one of llama.cpp's built-in chat templates."""
    if not messages:
        raise ValueError("no messages")
    keep = []
    chat = ffi.new("struct llama_chat_message[]", len(messages))
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise ValueError("each message needs a string 'role' and a string 'content'")
        role, content = ffi.new("char[]", m["role"].encode()), ffi.new("char[]", m["content"].encode())
        keep += [role, content]
        chat[i].role, chat[i].content = role, content
    tmpl = template.encode()
    size = 2 * sum(len(m["content"]) + len(m["role"]) for m in messages) + 256
    buf = ffi.new("char[]", size)
    n = lib.llama_chat_apply_template(tmpl, chat, len(messages), add_assistant, buf, size)
    if n > size:
        buf = ffi.new("char[]", n)
        n = lib.llama_chat_apply_template(tmpl, chat, len(messages), add_assistant, buf, n)
    if n < 0:
        raise ValueError(_with_cause("llama.cpp does not support this chat template"))
    return ffi.unpack(buf, n).decode("utf-8", "replace")


def builtin_chat_templates() -> list[str]:
    """The names of the chat formats llama.cpp has built in (``chatml``, ``llama3``, ``gemma``, ...)."""
    n = lib.llama_chat_builtin_templates(ffi.NULL, 0)
    names = ffi.new("char *[]", n)
    lib.llama_chat_builtin_templates(names, n)
    return [ffi.string(names[i]).decode() for i in range(n)]


def _read_string(call: Callable[[Any, int], int], size: int = 256) -> str:
    """Call a llama.cpp ``(buf, size) -> needed length`` function, growing the buffer if needed."""
    buf = ffi.new("char[]", size)
    n = call(buf, size)
    if n >= size:
        buf = ffi.new("char[]", n + 1)
        n = call(buf, n + 1)
    return ffi.string(buf).decode("utf-8", "replace") if n >= 0 else ""


class Vocab:
    """Tokenizer of a model; lives as long as its model."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self._ptr = lib.llama_model_get_vocab(model.ptr)

    @property
    def ptr(self) -> Any:
        self.model.ptr  # raises if the model is closed  # noqa: B018
        return self._ptr

    @property
    def n_tokens(self) -> int:
        return lib.llama_vocab_n_tokens(self.ptr)

    @property
    def bos(self) -> int:
        return lib.llama_vocab_bos(self.ptr)

    @property
    def eos(self) -> int:
        return lib.llama_vocab_eos(self.ptr)

    @property
    def add_bos(self) -> bool:
        return bool(lib.llama_vocab_get_add_bos(self.ptr))

    @property
    def add_eos(self) -> bool:
        return bool(lib.llama_vocab_get_add_eos(self.ptr))

    @property
    def add_sep(self) -> bool:
        return bool(lib.llama_vocab_get_add_sep(self.ptr))

    @property
    def sep(self) -> int:
        return lib.llama_vocab_sep(self.ptr)

    def fim(self, kind: str) -> int:
        """A fill-in-the-middle token: ``pre``, ``suf``, ``mid``, ``pad``, ``rep`` or ``sep``
        (-1 when the vocab has none)."""
        if kind not in ("pre", "suf", "mid", "pad", "rep", "sep"):
            raise ValueError(f"unknown FIM token kind {kind!r}")
        return getattr(lib, f"llama_vocab_fim_{kind}")(self.ptr)

    def is_eog(self, token: int) -> bool:
        return bool(lib.llama_vocab_is_eog(self.ptr, token))

    def eog_tokens(self) -> tuple[int, ...]:
        """Every end-of-generation token. One C call per vocabulary entry (262k for Gemma 3):
        read it once when the model loads, never per request."""
        ptr, is_eog = self.ptr, lib.llama_vocab_is_eog
        return tuple(t for t in range(lib.llama_vocab_n_tokens(ptr)) if is_eog(ptr, t))

    def tokenize(self, text: str | bytes, *, add_special: bool = True, parse_special: bool = False) -> list[int]:
        data = text.encode("utf-8") if isinstance(text, str) else text
        cap = len(data) + 8
        buf = ffi.new("llama_token[]", cap)
        n = lib.llama_tokenize(self.ptr, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:
            if n == -(2**31):
                raise LlamaError("tokenization result does not fit in int32")
            cap = -n
            buf = ffi.new("llama_token[]", cap)
            n = lib.llama_tokenize(self.ptr, data, len(data), buf, cap, add_special, parse_special)
        return list(ffi.unpack(buf, n))

    def token_to_piece(self, token: int, *, special: bool = False) -> bytes:
        self._check_token(token)
        buf = ffi.new("char[]", 64)
        n = lib.llama_token_to_piece(self.ptr, token, buf, 64, 0, special)
        if n < 0:
            buf = ffi.new("char[]", -n)
            n = lib.llama_token_to_piece(self.ptr, token, buf, -n, 0, special)
        return ffi.unpack(buf, n)

    def detokenize(self, tokens: Sequence[int], *, remove_special: bool = False, unparse_special: bool = False) -> str:
        for t in tokens:
            self._check_token(t)
        toks = ffi.new("llama_token[]", list(tokens))
        cap = max(16, 8 * len(tokens))
        buf = ffi.new("char[]", cap)
        n = lib.llama_detokenize(self.ptr, toks, len(tokens), buf, cap, remove_special, unparse_special)
        if n < 0:
            cap = -n
            buf = ffi.new("char[]", cap)
            n = lib.llama_detokenize(self.ptr, toks, len(tokens), buf, cap, remove_special, unparse_special)
        return ffi.unpack(buf, n).decode("utf-8", "replace")

    def _check_token(self, token: int) -> None:
        if not 0 <= token < self.n_tokens:
            raise ValueError(f"token id {token} out of range [0, {self.n_tokens})")


# --- batch ------------------------------------------------------------------------------------
class Batch(_Owner):
    """A ``llama_batch`` allocated once and refilled every step.

    ``tokens``, ``pos`` and ``logits`` are numpy views of the C arrays (no copies).
    """

    _what = "batch"

    def __init__(self, capacity: int, n_seq_max: int = 1) -> None:
        if capacity <= 0 or n_seq_max <= 0:
            raise ValueError("Batch capacity and n_seq_max must be positive")
        raw = lib.llama_batch_init(capacity, 0, n_seq_max)
        super().__init__(raw, lib.llama_batch_free)
        self.capacity = capacity
        self.n_seq_max = n_seq_max
        self.tokens = np.frombuffer(ffi.buffer(raw.token, 4 * capacity), dtype=np.int32)
        self.pos = np.frombuffer(ffi.buffer(raw.pos, 4 * capacity), dtype=np.int32)
        self.n_seq_id = np.frombuffer(ffi.buffer(raw.n_seq_id, 4 * capacity), dtype=np.int32)
        self.logits = np.frombuffer(ffi.buffer(raw.logits, capacity), dtype=np.int8)
        # seq_id is an array of per-token pointers (llama.cpp allocates each token's ids apart)
        self._seq = [np.frombuffer(ffi.buffer(raw.seq_id[i], 4 * n_seq_max), dtype=np.int32) for i in range(capacity)]
        self.n_tokens = 0

    @property
    def struct(self) -> Any:
        raw = self.ptr
        raw.n_tokens = self.n_tokens
        return raw

    def clear(self) -> None:
        self.n_tokens = 0

    def add(self, token: int, pos: int, seq_ids: int | Iterable[int] = 0, logits: bool = False) -> None:
        i = self.n_tokens
        if i >= self.capacity:
            raise ValueError(f"batch is full ({self.capacity} tokens)")
        seqs = [seq_ids] if isinstance(seq_ids, int) else list(seq_ids)
        if not 1 <= len(seqs) <= self.n_seq_max:
            raise ValueError(f"a token needs 1..{self.n_seq_max} sequence ids, got {len(seqs)}")
        self.tokens[i] = token
        self.pos[i] = pos
        self.n_seq_id[i] = len(seqs)
        self._seq[i][: len(seqs)] = seqs
        self.logits[i] = logits
        self.n_tokens = i + 1

    def add_sequence(
        self,
        tokens: Sequence[int] | np.ndarray,
        start_pos: int = 0,
        seq_id: int = 0,
        logits_last: bool = True,
        logits_all: bool = False,
    ) -> None:
        """Append a run of tokens of one sequence; only the last one asks for logits by default
        (every one with ``logits_all``)."""
        toks = np.asarray(tokens, dtype=np.int32)
        n, i = len(toks), self.n_tokens
        if i + n > self.capacity:
            raise ValueError(f"{n} tokens do not fit: batch has {self.capacity - i} of {self.capacity} left")
        self.tokens[i : i + n] = toks
        self.pos[i : i + n] = np.arange(start_pos, start_pos + n, dtype=np.int32)
        self.n_seq_id[i : i + n] = 1
        for j in range(i, i + n):
            self._seq[j][0] = seq_id
        self.logits[i : i + n] = 1 if logits_all else 0
        if logits_last and n:
            self.logits[i + n - 1] = 1
        self.n_tokens = i + n


# --- sampler ----------------------------------------------------------------------------------
class Sampler(_Owner):
    """A llama.cpp sampler chain. ``Sampler()`` is greedy; see :meth:`from_params`."""

    _what = "sampler"

    def __init__(self, stages: Iterable[Any] | None = None) -> None:
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        super().__init__(chain, lib.llama_sampler_free)  # the chain frees its stages
        for stage in stages if stages is not None else [lib.llama_sampler_init_greedy()]:
            if stage == ffi.NULL:
                raise LlamaError(_with_cause("llama.cpp rejected a sampler stage"))
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


# --- context ----------------------------------------------------------------------------------
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


# LLAMA_STATE_SEQ_FLAGS_NONE / _PARTIAL_ONLY (macros: not in the cffi declarations). A partial
# state is only what cannot be rolled back by removing positions: the sliding-window (SWA) cache's
# cells, a recurrent model's state.
_SEQ_FLAGS_NONE = 0
_SEQ_FLAGS_PARTIAL_ONLY = 1


def _seq_flags(partial: bool) -> int:
    return _SEQ_FLAGS_PARTIAL_ONLY if partial else _SEQ_FLAGS_NONE


def _attach_threadpools(ctx: Any, n_threads: int, n_threads_batch: int, poll: int) -> tuple[Any, ...]:
    """Give the context persistent CPU thread pools, as llama-server does (common_threadpools).

    Without them ggml starts and joins its threads for every graph, i.e. every decode; a pool's
    threads stay and poll briefly (``poll`` 0-100) for the next graph. The generation pool starts
    paused when prompts get a pool of their own."""
    if not 0 <= poll <= 100:
        raise ValueError(f"poll must be within 0..100, got {poll}")
    params = lib.ggml_threadpool_params_default(n_threads)
    params.poll = poll
    batch_params = lib.ggml_threadpool_params_default(n_threads_batch)
    batch_params.poll = poll
    pools: list[Any] = []
    batch_pool = ffi.NULL
    if not lib.ggml_threadpool_params_match(ffi.addressof(params), ffi.addressof(batch_params)):
        batch_pool = lib.ggml_threadpool_new(ffi.addressof(batch_params))
        if batch_pool == ffi.NULL:
            return ()  # ggml falls back to threads per graph
        pools.append(batch_pool)
        params.paused = True
    pool = lib.ggml_threadpool_new(ffi.addressof(params))
    if pool == ffi.NULL:
        for p in pools:
            lib.ggml_threadpool_free(p)
        return ()
    pools.append(pool)
    lib.llama_attach_threadpool(ctx, pool, batch_pool)
    return tuple(pools)


def _free_context(ctx: Any, pools: tuple[Any, ...]) -> None:
    lib.llama_free(ctx)  # first: the context may still hold the pools
    for pool in pools:
        lib.ggml_threadpool_free(pool)


class Context(_Owner):
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
        # Abort support without the GIL: a C callback reads this int, any thread may set it.
        self._abort_flag = ffi.new("int *", 0)
        params.abort_callback = lib.pyllama_abort_on_flag
        params.abort_callback_data = self._abort_flag
        take_recent_problems()
        ptr = lib.llama_init_from_model(model.ptr, params)
        if ptr == ffi.NULL:
            raise LlamaError(_with_cause(f"llama.cpp could not create a context for {model.path}"))
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

    def set_threads(self, n_threads: int, n_threads_batch: int | None = None) -> None:
        lib.llama_set_n_threads(self.ptr, n_threads, n_threads_batch or n_threads)

    # decode --------------------------------------------------------------------------------
    def decode(self, batch: Batch) -> None:
        """One ``llama_decode`` (GIL released); return codes become exceptions."""
        ctx = self.ptr
        n = batch.n_tokens
        if n == 0:
            raise InvalidBatchError("empty batch", -1)
        if n > self.n_batch:  # llama.cpp asserts (aborts the process) on this
            raise InvalidBatchError(f"batch of {n} tokens exceeds n_batch={self.n_batch}", -1)
        raw = batch.struct
        take_recent_problems()
        with self._decode_lock:
            code = lib.llama_decode(ctx, raw)
        if code == 0:
            return
        if code == 1:
            raise NoKvSlotError(_with_cause(f"no KV cache slot for a batch of {n} tokens (n_ctx={self.n_ctx})"), 1)
        if code == 2:
            self._abort_flag[0] = 0
            raise DecodeAbortedError("decode aborted", 2)
        if code == -1:
            raise InvalidBatchError(_with_cause("invalid batch"), -1)
        raise DecodeError(_with_cause(f"llama_decode failed with code {code}"), code)

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
            raise IndexError(_with_cause(f"no logits for output {i}"))
        view = np.frombuffer(ffi.buffer(ptr, 4 * self.n_vocab), dtype=np.float32)
        return view.copy() if copy else view

    def embeddings(self, i: int = -1, *, copy: bool = False) -> np.ndarray:
        ptr = lib.llama_get_embeddings_ith(self.ptr, i)
        if ptr == ffi.NULL:
            raise IndexError(_with_cause(f"no embeddings for output {i} (create the context with embeddings=True)"))
        view = np.frombuffer(ffi.buffer(ptr, 4 * self.n_embd_out), dtype=np.float32)
        return view.copy() if copy else view

    def embeddings_seq(self, seq_id: int) -> np.ndarray:
        """The pooled embedding of sequence ``seq_id`` (a copy), for a context that pools; with
        ``rank`` pooling, the classifier's scores (one for a reranker)."""
        ptr = lib.llama_get_embeddings_seq(self.ptr, seq_id)
        if ptr == ffi.NULL:
            raise IndexError(_with_cause(f"no pooled embedding for sequence {seq_id}"))
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

    def seq_keep(self, seq_id: int) -> None:
        self.ptr  # noqa: B018
        lib.llama_memory_seq_keep(self._mem, seq_id)

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

    # state ---------------------------------------------------------------------------------
    def state_bytes(self) -> bytes:
        size = lib.llama_state_get_size(self.ptr)
        buf = ffi.new("uint8_t[]", size)
        n = lib.llama_state_get_data(self.ptr, buf, size)
        return ffi.unpack(ffi.cast("char *", buf), n)

    def load_state_bytes(self, data: bytes) -> None:
        n = lib.llama_state_set_data(self.ptr, data, len(data))
        if n == 0:
            raise LlamaError(_with_cause("llama.cpp rejected the state data"))

    def seq_state_size(self, seq_id: int, *, partial: bool = False) -> int:
        return lib.llama_state_seq_get_size_ext(self.ptr, seq_id, _seq_flags(partial))

    def seq_state_bytes(self, seq_id: int, size: int | None = None, *, partial: bool = False) -> bytearray:
        """One sequence's state (its KV cells), e.g. to keep a prompt in host memory; ``size``:
        :meth:`seq_state_size` when the caller has it already (llama.cpp walks the cells for it).
        ``partial``: only the part that removing positions cannot roll back (a context checkpoint)."""
        size = self.seq_state_size(seq_id, partial=partial) if size is None else size
        buf = bytearray(size)
        n = lib.llama_state_seq_get_data_ext(self.ptr, ffi.from_buffer(buf), size, seq_id, _seq_flags(partial))
        del buf[n:]
        return buf

    def load_seq_state_bytes(self, data: bytes | bytearray, seq_id: int, *, partial: bool = False) -> None:
        """Put a state from :meth:`seq_state_bytes` (of a context like this one) into ``seq_id``."""
        n = lib.llama_state_seq_set_data_ext(self.ptr, ffi.from_buffer(data), len(data), seq_id, _seq_flags(partial))
        if n != len(data):
            raise LlamaError(_with_cause(f"llama.cpp rejected the state of sequence {seq_id}"))

    def save_state_file(self, path: str | os.PathLike[str], tokens: Sequence[int]) -> None:
        toks = ffi.new("llama_token[]", list(tokens))
        if not lib.llama_state_save_file(self.ptr, os.fsencode(path), toks, len(tokens)):
            raise LlamaError(_with_cause(f"could not save state to {path}"))

    def save_seq_state_file(self, path: str | os.PathLike[str], seq_id: int, tokens: Sequence[int]) -> int:
        """Save one sequence's KV state and its tokens; returns the bytes written."""
        toks = ffi.new("llama_token[]", list(tokens))
        n = lib.llama_state_seq_save_file(self.ptr, os.fsencode(path), seq_id, toks, len(tokens))
        if n == 0:
            raise LlamaError(_with_cause(f"could not save sequence {seq_id} to {path}"))
        return n

    def load_seq_state_file(
        self, path: str | os.PathLike[str], seq_id: int, max_tokens: int | None = None
    ) -> list[int]:
        """Restore a sequence saved with :meth:`save_seq_state_file` into ``seq_id``; returns its tokens."""
        return self._load_state(
            path,
            max_tokens,
            lambda p, toks, cap, n: lib.llama_state_seq_load_file(self.ptr, p, seq_id, toks, cap, n) != 0,
        )

    def load_state_file(self, path: str | os.PathLike[str], max_tokens: int | None = None) -> list[int]:
        """Restore a state saved with :meth:`save_state_file`; returns its tokens."""
        return self._load_state(
            path, max_tokens, lambda p, toks, cap, n: bool(lib.llama_state_load_file(self.ptr, p, toks, cap, n))
        )

    def _load_state(self, path: str | os.PathLike[str], max_tokens: int | None, load: Callable[..., bool]) -> list[int]:
        """Shared by the whole-context and per-sequence loaders: ``load(path, tokens, capacity, n_out)``."""
        if not Path(path).is_file():
            raise FileNotFoundError(f"state file not found: {path}")
        cap = max_tokens if max_tokens is not None else self.n_ctx
        toks = ffi.new("llama_token[]", cap)
        n = ffi.new("size_t *")
        if not load(os.fsencode(path), toks, cap, n):
            raise LlamaError(_with_cause(f"could not load state from {path}"))
        return list(ffi.unpack(toks, n[0]))
