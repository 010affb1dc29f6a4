"""Media in prompts: where a request's images and audio come from, and how a prompt that holds
them travels as tokens.

A multimodal prompt is a token list in which each medium fills as many cells as it takes in the
KV cache. Those cells hold one negative value derived from the medium's content id (the SHA-256
of its file): comparing two prompts cell by cell (prompt caching, slot choice, slot files) then
tells the same image from another without a look at the media themselves. ``MediaTokens.media``
maps each medium's first cell to its chunk, which the loop thread evaluates (``batching.py``).
"""

from __future__ import annotations

import base64
import binascii
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..mtmd import Chunk, Projector

__all__ = [
    "MediaMemory",
    "MediaTokens",
    "chat_media",
    "content_prompts",
    "is_media_cell",
    "load_media_url",
    "media_boundary",
    "multimodal_tokens",
]


class MediaTokens(list[int]):
    """A prompt's tokens with its media: ``media`` maps a medium's first cell to its chunk."""

    def __init__(self, tokens: list[int], media: dict[int, Chunk]) -> None:
        super().__init__(tokens)
        self.media = media


def media_cell(content_id: str) -> int:
    """The value of every cell of a medium with this content id (hex): negative, never a token,
    and the same in every process (slot files keep it)."""
    return -2 - int(content_id[:7] or "0", 16)


def is_media_cell(token: int) -> bool:
    return token < -1


class MediaMemory:
    """The placeholders (no pixels) of the media the KV cache has seen, by their cells' value:
    slot files save them beside the tokens. The most recent ``n_max`` are kept (a few hundred
    bytes each)."""

    def __init__(self, n_max: int = 256) -> None:
        self._n_max = n_max
        self._chunks: OrderedDict[int, Chunk] = OrderedDict()

    def remember(self, chunk: Chunk) -> None:
        cell = media_cell(chunk.id or "")
        self._chunks[cell] = chunk
        self._chunks.move_to_end(cell)
        while len(self._chunks) > self._n_max:
            self._chunks.popitem(last=False)

    def get(self, cell: int) -> Chunk | None:
        return self._chunks.get(cell)


def media_boundary(media: dict[int, Chunk], n: int) -> int:
    """``n`` moved back to the start of the medium it would cut in two (a cached prefix may keep
    whole media only)."""
    for start, chunk in media.items():
        if start < n < start + chunk.n_tokens:
            return start
    return n


def multimodal_tokens(projector: Projector, text: str, files: list[bytes]) -> MediaTokens:
    """``text`` with one media marker per file, as tokens and media (``MediaError`` if unusable)."""
    from ..mtmd import MediaError

    chunks = projector.tokenize(text, [projector.media(f) for f in files])
    tokens: list[int] = []
    media: dict[int, Chunk] = {}
    for chunk in chunks:
        if chunk.is_text:
            tokens += chunk.tokens
            continue
        if chunk.n_pos != chunk.n_tokens:
            raise MediaError("this projector's models place media on several position axes (M-RoPE): not supported yet")
        media[len(tokens)] = chunk
        tokens += [media_cell(chunk.id or "")] * chunk.n_tokens
    if not tokens or is_media_cell(tokens[-1]):
        raise MediaError("a prompt must end with text after its last medium")
    return MediaTokens(tokens, media)


def decode_base64(data: str) -> bytes:
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        raw = b""
    if not raw:
        raise ValueError("Invalid base64 value")
    return raw


# what one remote medium may take, as llama-server's download of it
DOWNLOAD_MAX_BYTES = 10 * 1024 * 1024
DOWNLOAD_TIMEOUT_S = 10.0


def load_media_url(url: Any, media_path: str | None) -> bytes:
    """A chat part's media (``image_url.url``, ``input_audio.data``): an ``http(s)`` URL (fetched,
    as llama-server does, ``--offline`` or not: that flag is about model downloads), a ``data:``
    URI, a ``file://`` path inside ``--media-path``, or raw base64, checked as llama-server does."""
    if not isinstance(url, str) or not url:
        raise ValueError("media URL must be a non-empty string")
    if url.startswith(("http://", "https://")):
        return _download(url)
    if url.startswith("file://"):
        return _local_file(url[len("file://") :], media_path)
    if url.startswith("data:"):
        head, sep, payload = url.partition(",")
        if not sep or "," in payload:
            raise ValueError("Invalid uri-encoded base64 value")
        if not head.startswith(("data:image/", "data:audio/", "data:video/")):
            raise ValueError(f"Invalid uri format: {head}")
        if not head.endswith("base64"):
            raise ValueError("uri must be base64 encoded")
        return decode_base64(payload)
    return decode_base64(url)


def _download(url: str) -> bytes:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as r:  # noqa: S310 - http(s) only, checked above
            data: bytes = r.read(DOWNLOAD_MAX_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ValueError(f"Failed to download image: {url}: {getattr(exc, 'reason', exc)}") from None
    if len(data) > DOWNLOAD_MAX_BYTES:
        raise ValueError(f"Failed to download image: {url} is over {DOWNLOAD_MAX_BYTES} bytes")
    return data


def _bad_name(part: str) -> bool:
    """A path element llama.cpp's fs_validate_filename refuses (traversal, reserved characters)."""
    return (
        part in (".", "..")
        or part != part.strip()
        or part.endswith(".")
        or len(part.encode()) > 255
        or any(c in part for c in ':*?"<>|\\')
    )


def _local_file(name: str, media_path: str | None) -> bytes:
    if media_path is None:
        raise ValueError("file:// URLs are not allowed unless --media-path is specified")
    parts = [p for p in name.split("/") if p]
    bad = not parts or any(_bad_name(p) for p in parts)
    if bad or any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in name):
        raise ValueError(f"file path is not allowed: {name}")
    root = Path(media_path).resolve()
    path = root.joinpath(*parts).resolve()
    if root not in path.parents:  # a symbolic link out of the folder
        raise ValueError(f"file path is not allowed: {name}")
    try:
        return path.read_bytes()
    except OSError:
        raise ValueError(f"file does not exist or cannot be opened: {name}") from None


# chat parts that carry media, and where their URL (or base64 data) sits
_CHAT_MEDIA = {"image_url": ("image_url", "url"), "input_audio": ("input_audio", "data")}


def _part_url(value: Any, key: str) -> Any:
    """The URL of ``{"url": ...}`` (or ``{"data": ...}``), or a bare string (llama-cpp-python's form)."""
    if isinstance(value, dict):
        return value.get(key) or value.get("url")
    return value


def chat_media(messages: list[Any], marker: str, media_path: str | None) -> tuple[list[Any], list[bytes]]:
    """A chat's ``image_url``/``input_audio`` parts read (:func:`load_media_url`) and replaced by
    media markers, in order: the messages for the template, and the files for the prompt."""
    files: list[bytes] = []
    out = []
    for msg in messages:
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, list):
            parts = []
            for part in content:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind in _CHAT_MEDIA:
                    field, key = _CHAT_MEDIA[kind]
                    files.append(load_media_url(_part_url(part.get(field), key), media_path))
                    part = {"type": "media_marker", "text": marker}
                parts.append(part)
            msg = {**msg, "content": parts}
        out.append(msg)
    return out, files


def content_prompts(inputs: Any, marker: str | None, media_path: str | None) -> Any:
    """Embeddings inputs given as ``{"content": [parts]}`` (text and media parts, OpenAI-style)
    turned into ``{"prompt_string", "multimodal_data"}`` prompts; other inputs pass unchanged."""
    if not isinstance(inputs, list):
        return content_prompts([inputs], marker, media_path)[0]
    out = []
    for item in inputs:
        if isinstance(item, dict) and isinstance(item.get("content"), list):
            text, files = [], []
            for part in item["content"]:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind == "text":
                    text.append(str(part.get("text", "")))
                elif kind in _CHAT_MEDIA:
                    if marker is None:
                        raise ValueError(f"{_CHAT_MEDIA[kind][0]} input needs a multimodal projector (--mmproj)")
                    field, key = _CHAT_MEDIA[kind]
                    files.append(load_media_url(_part_url(part.get(field), key), media_path))
                    text.append(marker)
                else:
                    raise ValueError("unsupported content[].type")
            item = {"prompt_string": "".join(text), "multimodal_data": files} if files else "".join(text)
        out.append(item)
    return out
