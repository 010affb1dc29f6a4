"""Loading a GGUF model, and llama.cpp's built-in chat templates."""

from __future__ import annotations

import functools
import logging
import os
import re
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._native import captured_log_lines, ffi, lib, take_recent_problems
from ..devices import gpu_unavailable_reason
from .errors import ModelLoadError, with_cause
from .owner import Owner, read_string
from .vocab import Vocab

log = logging.getLogger(__name__)

__all__ = ["Model", "apply_chat_template", "builtin_chat_templates", "check_gguf_file"]

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


def _warn_without_gpu(n_gpu_layers: int) -> None:
    """Layers asked to be offloaded where nothing can take them: llama.cpp would run on the CPU
    without a word; say so, and why (no driver, no CUDA runtime, a CPU-only build...)."""
    why = gpu_unavailable_reason()
    if why is not None:
        log.warning(
            "n_gpu_layers=%d asked for, but no GPU is available (%s): the model runs on the CPU", n_gpu_layers, why
        )


_LAYER_DEVICE = re.compile(r"layer\s+(\d+) assigned to device (\S+?),")


def _layer_devices(log: list[str]) -> tuple[str, ...]:
    """The device of each layer from llama.cpp's load report ("layer 3 assigned to device CUDA0")."""
    found = {int(m[1]): m[2] for line in log if (m := _LAYER_DEVICE.search(line))}
    return tuple(found[i] for i in sorted(found))


def _place_layers(params: Any, devices: Sequence[str] | None, tensor_split: Sequence[float]) -> list[Any]:
    """``devices`` and ``tensor_split`` into the load parameters; returns the C arrays they point
    to, which must live until the load returns."""
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
    return keep


class Model(Owner):
    """A loaded GGUF model (``llama_model``)."""

    _what = "model"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        n_gpu_layers: int = -1,
        use_mmap: bool = True,
        use_mlock: bool = False,
        vocab_only: bool = False,
        devices: Sequence[str] | None = None,
        tensor_split: Sequence[float] = (),
        progress: Callable[[float], object] | None = None,
    ) -> None:
        """``tensor_split``: the share of the model each device takes, in device order (llama.cpp's
        ``--tensor-split``; empty: by each device's free memory). ``n_gpu_layers``: how many layers
        go to the GPUs (and RPC servers), counting the output layer; negative (llama.cpp's default)
        means all of them; without such a device every layer stays on the CPU whatever it says."""
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
        keep = _place_layers(params, devices, tensor_split)
        if progress is not None:
            handle = ffi.new_handle(progress)
            keep.append(handle)
            params.progress_callback = lib._pyllama_progress_callback
            params.progress_callback_user_data = handle
        if n_gpu_layers > 0 and devices is None:  # negative: "all the backends take", serve's default
            _warn_without_gpu(n_gpu_layers)
        take_recent_problems()
        with captured_log_lines() as log:
            ptr = lib.llama_model_load_from_file(os.fsencode(self.path), params)
        if ptr == ffi.NULL:
            raise ModelLoadError(with_cause(f"llama.cpp could not load {self.path}"))
        super().__init__(ptr, lib.llama_model_free)
        self.vocab = Vocab(self)
        # Where llama.cpp put each repeating layer and, last, the output layer (the input layer,
        # the token embeddings, always stays on the CPU); empty when no tensors were loaded.
        self.layer_devices: tuple[str, ...] = _layer_devices(log)

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
            key = read_string(functools.partial(lib.llama_model_meta_key_by_index, self.ptr, i))
            out[key] = read_string(functools.partial(lib.llama_model_meta_val_str_by_index, self.ptr, i))
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
        raise ValueError(with_cause("llama.cpp does not support this chat template"))
    return ffi.unpack(buf, n).decode("utf-8", "replace")


def builtin_chat_templates() -> list[str]:
    """The names of the chat formats llama.cpp has built in (``chatml``, ``llama3``, ``gemma``, ...)."""
    n = lib.llama_chat_builtin_templates(ffi.NULL, 0)
    names = ffi.new("char *[]", n)
    lib.llama_chat_builtin_templates(names, n)
    return [ffi.string(names[i]).decode() for i in range(n)]
