"""Images (and audio) into a text model: llama.cpp's ``mtmd`` library, bound from ``mtmd.h``.

A :class:`Projector` is a model's ``--mmproj`` file loaded beside it. It decodes media files
(:meth:`Projector.media`: PNG, JPEG, BMP, GIF, ... and, for audio projectors, WAV/MP3/FLAC) and
splits a prompt with media markers into :class:`Chunk` s: runs of text tokens and one chunk per
medium, which :meth:`Projector.eval_chunk` puts into a context's KV cache at a position.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._native import ffi, lib
from .llama import Context, LlamaError, Model, check_gguf_file
from .llama.errors import with_cause
from .llama.owner import Owner

__all__ = ["Chunk", "Media", "MediaError", "Projector", "ProjectorLoadError"]

# what mtmd calls its chunk kinds
_KINDS = {
    lib.MTMD_INPUT_CHUNK_TYPE_TEXT: "text",
    lib.MTMD_INPUT_CHUNK_TYPE_IMAGE: "image",
    lib.MTMD_INPUT_CHUNK_TYPE_AUDIO: "audio",
}


class ProjectorLoadError(LlamaError):
    """The ``--mmproj`` file could not be loaded for this model."""


class MediaError(ValueError):
    """A media file that cannot be used: not an image/audio file, of a kind the projector does
    not take, or more media markers in the prompt than files (or fewer)."""


class Media(Owner):
    """One decoded image or audio clip (``mtmd_bitmap``). ``id`` identifies its content (the
    SHA-256 of the file's bytes): prompt caching compares it."""

    _what = "media"

    def __init__(self, ptr: Any) -> None:
        super().__init__(ptr, lib.mtmd_bitmap_free)

    @property
    def id(self) -> str:
        raw = lib.mtmd_bitmap_get_id(self.ptr)
        return "" if raw == ffi.NULL else ffi.string(raw).decode()

    @property
    def is_audio(self) -> bool:
        return bool(lib.mtmd_bitmap_is_audio(self.ptr))

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) in pixels; for audio, (samples, 1)."""
        return lib.mtmd_bitmap_get_nx(self.ptr), lib.mtmd_bitmap_get_ny(self.ptr)


@dataclass(frozen=True)
class Chunk:
    """A piece of a tokenized prompt: text tokens, or one image/audio clip. ``n_tokens`` is how
    many KV cells it fills, ``n_pos`` how far it moves the position (they differ under M-RoPE).
    ``id`` identifies a medium's content (None for text). The C chunk is owned by ``_owner``."""

    kind: str
    n_tokens: int
    n_pos: int
    id: str | None
    tokens: tuple[int, ...]  # the text tokens (empty for media)
    _owner: Owner

    @property
    def ptr(self) -> Any:
        return self._owner.ptr

    @property
    def is_text(self) -> bool:
        return self.kind == "text"

    def placeholder(self) -> Chunk:
        """The chunk without its pixels (what a cache keeps of a medium already decoded)."""
        return _wrap(lib.mtmd_input_chunk_get_placeholder(self.ptr))

    def save(self) -> bytes:
        """The chunk's metadata (not its pixels), as slot files keep it (``mtmd_input_chunk_save``)."""
        size = ffi.new("size_t *")
        if lib.mtmd_input_chunk_save(self.ptr, ffi.NULL, 0, size) != 0 or size[0] == 0:
            raise LlamaError(f"cannot serialize the {self.kind} chunk")
        buf = ffi.new("char[]", size[0])
        if lib.mtmd_input_chunk_save(self.ptr, buf, size[0], ffi.NULL) != 0:
            raise LlamaError(f"cannot serialize the {self.kind} chunk")
        return ffi.unpack(buf, size[0])

    @staticmethod
    def load(data: bytes) -> Chunk:
        """A chunk saved by :meth:`save` (a placeholder: it can be counted and cached, not encoded)."""
        raw = lib.mtmd_input_chunk_load(ffi.from_buffer(data), len(data)) if data else ffi.NULL
        if raw == ffi.NULL:
            raise ValueError("cannot load a media chunk from the slot file")
        return _wrap(raw)


def _chunk(raw: Any) -> Chunk:
    """A copy of one of a chunk list's chunks, owned by the returned :class:`Chunk`."""
    return _wrap(lib.mtmd_input_chunk_copy(raw))


def _wrap(ptr: Any) -> Chunk:
    """A :class:`Chunk` that owns (and frees) the C chunk ``ptr``."""
    owner = Owner(ptr, lib.mtmd_input_chunk_free)
    kind = _KINDS.get(lib.mtmd_input_chunk_get_type(ptr), "unknown")
    tokens: tuple[int, ...] = ()
    if kind == "text":
        n = ffi.new("size_t *")
        toks = lib.mtmd_input_chunk_get_tokens_text(ptr, n)
        tokens = tuple(toks[i] for i in range(n[0]))
    raw_id = lib.mtmd_input_chunk_get_id(ptr)
    return Chunk(
        kind=kind,
        n_tokens=lib.mtmd_input_chunk_get_n_tokens(ptr),
        n_pos=lib.mtmd_input_chunk_get_n_pos(ptr),
        id=None if raw_id == ffi.NULL else ffi.string(raw_id).decode(),
        tokens=tokens,
        _owner=owner,
    )


class Projector(Owner):
    """A multimodal projector (``--mmproj``) for ``model``: ``mtmd_init_from_file``.

    ``media_marker`` is the text that stands for each medium in a prompt (mtmd's default
    ``<__media__>``); ``image_min_tokens``/``image_max_tokens`` bound the tokens per image of
    models with a dynamic resolution (-1: the model's). ``use_gpu`` offloads the encoder."""

    _what = "projector"

    def __init__(
        self,
        path: str | os.PathLike[str],
        model: Model,
        *,
        use_gpu: bool = True,
        n_threads: int | None = None,
        media_marker: str | None = None,
        image_min_tokens: int = -1,
        image_max_tokens: int = -1,
        warmup: bool = True,
        flash_attn: str = "auto",
    ) -> None:
        self.path = Path(path)
        check_gguf_file(self.path)
        params = lib.mtmd_context_params_default()
        params.use_gpu = use_gpu
        params.print_timings = False
        params.n_threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
        params.warmup = warmup
        params.image_min_tokens = image_min_tokens
        params.image_max_tokens = image_max_tokens
        params.flash_attn_type = {
            "auto": lib.LLAMA_FLASH_ATTN_TYPE_AUTO,
            "on": lib.LLAMA_FLASH_ATTN_TYPE_ENABLED,
            "off": lib.LLAMA_FLASH_ATTN_TYPE_DISABLED,
        }[flash_attn]
        marker = ffi.new("char[]", (media_marker or "").encode())
        if media_marker:
            params.media_marker = marker
        ptr = lib.mtmd_init_from_file(os.fsencode(self.path), model.ptr, params)
        if ptr == ffi.NULL:
            raise ProjectorLoadError(with_cause(f"llama.cpp could not load the projector {self.path}"))
        super().__init__(ptr, lib.mtmd_free)
        self.model = model  # the projector reads the model's vocab and sizes: keep it alive
        self.marker = ffi.string(lib.mtmd_get_marker(ptr)).decode()
        self.vision = bool(lib.mtmd_support_vision(ptr))
        self.audio = bool(lib.mtmd_support_audio(ptr))
        self.non_causal = bool(lib.mtmd_decode_use_non_causal(ptr, ffi.NULL))

    def media(self, data: bytes) -> Media:
        """Decode an image or audio file (its bytes); raises :class:`MediaError` naming why not."""
        if not data:
            raise MediaError("empty media file")
        buf = ffi.from_buffer(data)
        options = lib.mtmd_helper_init_opt_default()
        wrapper = lib.mtmd_helper_bitmap_init_from_buf(self.ptr, buf, len(data), False, options)
        if wrapper.bitmap == ffi.NULL:
            raise MediaError(with_cause("Failed to load image or audio file"))
        media = Media(wrapper.bitmap)
        if media.is_audio and not self.audio:
            raise MediaError("audio input is not supported by this model's projector")
        if not media.is_audio and not self.vision:
            raise MediaError("image input is not supported by this model's projector")
        return media

    def tokenize(self, text: str, media: Sequence[Media] = (), *, add_special: bool = True) -> list[Chunk]:
        """Split ``text`` at its media markers (one per item of ``media``, in order) into chunks;
        special tokens in the text are parsed, as llama-server does for multimodal prompts."""
        raw = text.encode()
        cbuf = ffi.new("char[]", raw)
        inp = ffi.new("mtmd_input_text *", {"text": cbuf, "text_len": len(raw), "add_special": add_special,
                                            "parse_special": True})  # fmt: skip
        bitmaps = ffi.new("const mtmd_bitmap *[]", [m.ptr for m in media] or [ffi.NULL])
        chunks = lib.mtmd_input_chunks_init()
        try:
            status = lib.mtmd_tokenize(self.ptr, chunks, inp, bitmaps, len(media))
            if status != 0:  # 1: markers and files do not pair up; 2: a medium failed to preprocess
                raise MediaError(with_cause("Failed to tokenize prompt"))
            return [_chunk(lib.mtmd_input_chunks_get(chunks, i)) for i in range(lib.mtmd_input_chunks_size(chunks))]
        finally:
            lib.mtmd_input_chunks_free(chunks)

    def eval_chunk(self, ctx: Context, chunk: Chunk, n_past: int, seq_id: int, logits_last: bool = False) -> int:
        """Put ``chunk`` into ``ctx``'s KV cache for sequence ``seq_id`` from position ``n_past``
        (a medium is encoded first, then decoded in slices of the context's batch size);
        returns the position after it."""
        new_n_past = ffi.new("llama_pos *", n_past)  # mtmd adds the text it decodes to this
        status = lib.mtmd_helper_eval_chunk_single(
            self.ptr, ctx.ptr, chunk.ptr, n_past, seq_id, ctx.n_batch, logits_last, new_n_past
        )
        if status != 0:
            raise LlamaError(with_cause(f"failed to process the {chunk.kind} chunk (status {status})"))
        return int(new_n_past[0])
