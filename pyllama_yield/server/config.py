"""What an engine is built from, decided once: frozen, grouped by what each part configures.

Both front ends build one: ``serve`` from its settings (``cli.engine_config_from_settings``), the
in-process ``Llama`` from its keyword arguments. ``EngineConfig.create`` takes the flat names
(``n_ctx=``, ``n_parallel=``, ``draft_model_path=``, ...) and sorts them into their groups, so a
caller need not know the grouping.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from .params import CompletionParams

__all__ = [
    "CacheConfig",
    "ChatConfig",
    "ContextConfig",
    "DraftConfig",
    "EngineConfig",
    "LimitsConfig",
    "ModelConfig",
]


@dataclass(frozen=True)
class ModelConfig:
    """How the model file is loaded."""

    path: str
    n_gpu_layers: int = -1  # llama.cpp's default: every layer a GPU (or RPC server) takes
    use_mmap: bool = True
    use_mlock: bool = False
    name: str | None = None  # what the API calls it; the file name otherwise
    mmproj: str | None = None  # a multimodal projector: images (and audio) in prompts
    mmproj_offload: bool = True  # the projector's encoder on the GPU
    image_min_tokens: int = -1  # tokens per image, for dynamic-resolution projectors (-1: theirs)
    image_max_tokens: int = -1
    rpc_servers: tuple[str, ...] = ()  # host:port of llama.cpp rpc-servers whose devices take layers
    tensor_split: tuple[float, ...] = ()  # how much of the model each device takes (llama.cpp's -ts)

    def __post_init__(self) -> None:
        # tuples whatever sequence came in: the config stays hashable and frozen
        object.__setattr__(self, "rpc_servers", tuple(e.strip() for e in self.rpc_servers if e.strip()))
        object.__setattr__(self, "tensor_split", tuple(float(x) for x in self.tensor_split))
        if any(x < 0 for x in self.tensor_split):
            raise ValueError("tensor_split proportions must be >= 0")


@dataclass(frozen=True)
class ContextConfig:
    """llama.cpp's context parameters. ``n_ctx`` is the total over the ``n_parallel`` slots
    (0: the model's), split between them unless ``kv_unified``, as llama-server does."""

    n_ctx: int = 0
    n_parallel: int = 1
    kv_unified: bool = False
    n_batch: int = 512
    n_ubatch: int = 512
    n_threads: int | None = None
    n_threads_batch: int | None = None
    flash_attn: str = "auto"
    cache_type_k: str | None = None
    cache_type_v: str | None = None
    swa_full: bool = False

    def __post_init__(self) -> None:
        if self.n_parallel < 1 or self.n_batch < 1 or self.n_ctx < 0:
            raise ValueError("n_parallel and n_batch must be >= 1, n_ctx >= 0")


@dataclass(frozen=True)
class DraftConfig:
    """Speculative decoding with a draft model (none: ``path`` is None)."""

    path: str | None = None
    n_max: int = 4
    n_min: int = 0
    synth_rates: tuple[float, ...] = ()  # --spec-synth-rates: accept drafts by chance (benchmarks)

    def __post_init__(self) -> None:
        if self.n_max < 0:
            raise ValueError("n_draft must be >= 0")
        if self.synth_rates and self.path is None:
            raise ValueError("synthetic draft acceptance (--spec-synth-rates) needs a draft model (-md)")


@dataclass(frozen=True)
class ChatConfig:
    """How chats are rendered and parsed (``template``: a name or Jinja text; the model's own
    otherwise, ChatML when it has none)."""

    template: str | None = None
    use_jinja: bool = True
    reasoning_format: str = "deepseek"
    enable_thinking: bool | None = None


@dataclass(frozen=True)
class CacheConfig:
    """Reusing what the KV cache holds: the host-memory prompt cache (MiB; 0 off, -1 no limit),
    slot choice by prompt similarity, context shift when a slot fills up, and context checkpoints."""

    cache_ram_mib: int = 0
    cache_idle_slots: bool = False
    slot_prompt_similarity: float = 0.1
    context_shift: bool = False
    ctx_checkpoints: int = 32  # per slot, for SWA and recurrent models (see checkpoints.py)
    checkpoint_min_step: int = 8192


@dataclass(frozen=True)
class LimitsConfig:
    """What one request may ask for, and how the loop behaves when idle or decoding."""

    n_predict_max: int = -1
    n_probs_max: int = 100
    idle_sleep_ms: int = -1  # free the context after this long idle (-1: never)
    yield_decode: bool = True  # decode inside yield_to_queue (off only to measure what it buys)
    warmup: bool = True  # decode BOS+EOS once at load, as llama.cpp does


@dataclass(frozen=True)
class EngineConfig:
    model: ModelConfig
    context: ContextConfig = field(default_factory=ContextConfig)
    draft: DraftConfig = field(default_factory=DraftConfig)
    chat: ChatConfig = field(default_factory=ChatConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    defaults: CompletionParams = field(default_factory=CompletionParams)  # the server's sampling settings
    embedding: bool = False  # an embeddings (or, with pooling "rank", reranking) engine: no completions
    pooling: str | None = None  # None: the model's own
    lora: tuple[tuple[str, float], ...] = ()  # adapters with their scales (0: loaded, not applied)

    @classmethod
    def create(cls, model_path: str | os.PathLike[str], **options: Any) -> EngineConfig:
        """A config from flat keyword names: a group's field names (``n_ctx``, ``cache_ram_mib``, ...)
        or the aliases in ``_ALIASES`` (``draft_model_path``, ``n_draft``, ``chat_template``, ...)."""
        groups: dict[str, dict[str, Any]] = {name: {} for name in _GROUPS}
        top: dict[str, Any] = {}
        for key, value in options.items():
            group, name = _FLAT_NAMES.get(key, (None, key))
            if group is not None:
                groups[group][name] = value
            elif key in _TOP_LEVEL:
                top[key] = value
            else:
                raise TypeError(f"unknown engine option {key!r}")
        draft = groups["draft"]
        if "path" in draft and draft["path"] is not None:
            draft["path"] = os.fspath(draft["path"])
        if "synth_rates" in draft:
            draft["synth_rates"] = tuple(draft["synth_rates"])
        if "lora" in top:
            top["lora"] = tuple((os.fspath(p), float(s)) for p, s in top["lora"])
        if top.get("defaults") is None:
            top.pop("defaults", None)
        return cls(
            model=ModelConfig(os.fspath(model_path), **groups["model"]),
            **{name: _GROUPS[name](**kw) for name, kw in groups.items() if name != "model"},
            **top,
        )


_GROUPS: dict[str, type] = {
    "model": ModelConfig,
    "context": ContextConfig,
    "draft": DraftConfig,
    "chat": ChatConfig,
    "cache": CacheConfig,
    "limits": LimitsConfig,
}
# flat names that are not a group's own field name
_ALIASES = {
    "model_name": ("model", "name"),
    "draft_model_path": ("draft", "path"),
    "n_draft": ("draft", "n_max"),
    "n_draft_min": ("draft", "n_min"),
    "chat_template": ("chat", "template"),
}
_FLAT_NAMES: dict[str, tuple[str | None, str]] = {
    **{f.name: (group, f.name) for group, cls in _GROUPS.items() for f in dataclasses.fields(cls) if f.name != "path"},
    **_ALIASES,
}
_TOP_LEVEL = {"defaults", "embedding", "pooling", "lora"}
