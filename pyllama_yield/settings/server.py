"""``ServerSettings``: every flag of ``serve``. Each field names its llama-server flags (and the ``--no-``
form where llama-server has one) and its environment variable. A flag we cannot honour yet is still
declared, so that using it is an error that names it, never silently ignored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from ..server.params import CompletionParams
from .agent import AgentSettings
from .chat import ChatSettings
from .defaults import RequestDefaults
from .fields import NOT_YET, UnsupportedFlagError, arg, lora_scaled
from .hub import HubSettings
from .keys import KeyRing
from .limits import ServerLimits
from .router import RouterSettings

__all__ = ["ServerSettings"]


class ServerSettings(RequestDefaults, ChatSettings, ServerLimits, AgentSettings, RouterSettings, HubSettings):
    """llama-server's options that matter to a server, with its defaults."""

    # only llama-server's LLAMA_ARG_* names (the aliases) and PYLLAMA_* ones are read from the environment
    model_config = SettingsConfigDict(populate_by_name=True, extra="forbid", env_prefix="PYLLAMA_")

    # --- model and compute
    model: str | None = arg(
        None, "-m", "--model", env="LLAMA_ARG_MODEL", help="GGUF model (default: a tiny demo model)"
    )
    ctx_size: int = arg(
        0, "-c", "--ctx-size", env="LLAMA_ARG_CTX_SIZE", help="total context over all slots, 0 = the model's"
    )
    parallel: int = arg(-1, "-np", "--parallel", env="LLAMA_ARG_N_PARALLEL", help="slots (-1 = auto: 4, unified KV)")
    kv_unified: bool = arg(
        False,
        "-kvu",
        "--kv-unified",
        neg=("-no-kvu", "--no-kv-unified"),
        env="LLAMA_ARG_KV_UNIFIED",
        help="one KV buffer shared by all slots (each slot may use the whole context)",
    )
    batch_size: int = arg(2048, "-b", "--batch-size", env="LLAMA_ARG_BATCH", help="logical batch size")
    ubatch_size: int = arg(512, "-ub", "--ubatch-size", env="LLAMA_ARG_UBATCH", help="physical batch size")
    threads: int = arg(-1, "-t", "--threads", env="LLAMA_ARG_THREADS", help="threads for generation (-1 = all cores)")
    threads_batch: int = arg(-1, "-tb", "--threads-batch", help="threads for prompt processing (-1 = --threads)")
    n_gpu_layers: int = arg(
        -1,
        "-ngl",
        "--gpu-layers",
        "--n-gpu-layers",
        env="LLAMA_ARG_N_GPU_LAYERS",
        help="layers to offload (-1 = all that the backend takes)",
    )
    flash_attn: Literal["on", "off", "auto"] = arg("auto", "-fa", "--flash-attn", env="LLAMA_ARG_FLASH_ATTN")
    cache_type_k: str = arg("f16", "-ctk", "--cache-type-k", env="LLAMA_ARG_CACHE_TYPE_K", help="KV cache type for K")
    cache_type_v: str = arg("f16", "-ctv", "--cache-type-v", env="LLAMA_ARG_CACHE_TYPE_V", help="KV cache type for V")
    mlock: bool = arg(False, "--mlock", env="LLAMA_ARG_MLOCK", help="keep the model in RAM")
    mmap: bool = arg(True, "--mmap", neg=("--no-mmap",), env="LLAMA_ARG_MMAP", help="memory-map the model")
    swa_full: bool = arg(False, "--swa-full", env="LLAMA_ARG_SWA_FULL", help="full-size SWA cache")
    warmup: bool = arg(
        True, "--warmup", neg=("--no-warmup",), help="decode BOS+EOS once at load, so the first request is not slower"
    )
    rpc: str | None = arg(None, "--rpc", env="LLAMA_ARG_RPC", help="comma-separated rpc-server host:port list")
    tensor_split: str | None = arg(
        None,
        "-ts",
        "--tensor-split",
        env="LLAMA_ARG_TENSOR_SPLIT",
        help="share of the model for each device, e.g. 3,1 (default: by free memory)",
    )
    mmproj: str | None = arg(
        None, "-mm", "--mmproj", env="LLAMA_ARG_MMPROJ", help="multimodal projector file (images/audio in prompts)"
    )
    no_mmproj: bool = arg(False, "--no-mmproj", env="LLAMA_ARG_NO_MMPROJ", help="ignore --mmproj")
    mmproj_offload: bool = arg(
        True,
        "--mmproj-offload",
        neg=("--no-mmproj-offload",),
        env="LLAMA_ARG_MMPROJ_OFFLOAD",
        help="run the projector on the GPU",
    )
    media_path: str | None = arg(
        None, "--media-path", env="LLAMA_ARG_MEDIA_PATH", help="folder that file:// media URLs may read from"
    )
    image_min_tokens: int = arg(
        -1, "--image-min-tokens", env="LLAMA_ARG_IMAGE_MIN_TOKENS", help="min tokens per image (dynamic resolution)"
    )
    image_max_tokens: int = arg(
        -1, "--image-max-tokens", env="LLAMA_ARG_IMAGE_MAX_TOKENS", help="max tokens per image (dynamic resolution)"
    )
    model_draft: str | None = arg(
        None,
        "-md",
        "--spec-draft-model",
        "--model-draft",
        "--draft",
        env="LLAMA_ARG_SPEC_DRAFT_MODEL",
        help="draft model for speculative decoding",
    )
    spec_draft_n_max: int = arg(
        16, "--draft-max", "--spec-draft-n-max", env="LLAMA_ARG_SPEC_DRAFT_N_MAX", help="tokens drafted per step"
    )
    spec_draft_n_min: int = arg(
        0,
        "--draft-min",
        "--spec-draft-n-min",
        env="LLAMA_ARG_SPEC_DRAFT_N_MIN",
        help="fewer drafts than this are not verified",
    )
    spec_synth_rates: str | None = arg(
        None,
        "--spec-synth-rates",
        env="LLAMA_ARG_SPEC_SYNTH_RATES",
        help="P0,P1,...: accept draft i with this overall probability, not by match (benchmarking only)",
    )
    spec_synth_len: float | None = arg(
        None, "--spec-synth-len", env="LLAMA_ARG_SPEC_SYNTH_LEN", supported=NOT_YET + " (use --spec-synth-rates)"
    )
    spec_type: Literal["draft-simple"] | None = arg(
        None, "--spec-type", help="speculative decoding method: draft-simple (a draft model) is what this server does"
    )
    cont_batching: bool = arg(
        True,
        "-cb",
        "--cont-batching",
        neg=("-nocb", "--no-cont-batching"),
        env="LLAMA_ARG_CONT_BATCHING",
        help="continuous batching (always on here)",
        supported="this server always batches continuously; turning it off is not built",
    )

    # --- HTTP
    host: str = arg("127.0.0.1", "--host", env="LLAMA_ARG_HOST")
    port: int = arg(8080, "--port", env="LLAMA_ARG_PORT")
    api_key: str | None = arg(
        None, "--api-key", env="LLAMA_API_KEY", help="require 'Authorization: Bearer KEY' (comma-separated keys)"
    )
    api_key_file: str | None = arg(
        None,
        "--api-key-file",
        env="LLAMA_ARG_API_KEY_FILE",
        help="API keys, one per line ('#': a comment); a line may add name=, weight=, priority=, max_in_flight=, tpm=",
    )
    cors_origins: str | None = arg(
        None,
        "--cors-origins",
        env="LLAMA_ARG_CORS_ORIGINS",
        help="allowed CORS origins: '*' echoes the caller's, 'localhost' only local ones, or a list "
        "(default: '*', or 'localhost' with --tools or MCP servers)",
    )
    alias: str | None = arg(None, "-a", "--alias", env="LLAMA_ARG_ALIAS", help="model name in answers and /v1/models")
    tags: str | None = arg(None, "--tags", env="LLAMA_ARG_TAGS", help="comma-separated model tags (informational)")
    threads_http: int = arg(-1, "--threads-http", env="LLAMA_ARG_THREADS_HTTP", help="threads waiting on requests")
    pin_event_loop: bool = arg(
        True,
        "--pin-event-loop",
        neg=("--no-pin-event-loop",),
        help="when -t/-tb leave this process a CPU, run the HTTP event loop on the last CPU and the model on the rest",
    )
    metrics: bool = arg(False, "--metrics", env="LLAMA_ARG_ENDPOINT_METRICS", help="serve /metrics")
    props: bool = arg(False, "--props", env="LLAMA_ARG_ENDPOINT_PROPS", help="allow POST /props")
    slots: bool = arg(True, "--slots", neg=("--no-slots",), env="LLAMA_ARG_ENDPOINT_SLOTS", help="serve /slots")
    ui: bool = arg(
        True,
        "--ui",
        "--webui",
        neg=("--no-ui", "--no-webui"),
        env="LLAMA_ARG_UI",
        help="serve the chat page at / (--no-ui: / is a 404, as in llama-server)",
    )
    path: str | None = arg(
        None, "--path", env="LLAMA_ARG_STATIC_PATH", help="serve the page's static files from this folder instead"
    )
    verbose: bool = arg(False, "-v", "--verbose", "--log-verbose", help="log everything")
    log_disable: bool = arg(False, "--log-disable", help="no logs")
    log_level: str = arg("warning", "--log-level", help="uvicorn's log level")
    timeout: int = arg(
        3600,
        "-to",
        "--timeout",
        env="LLAMA_ARG_TIMEOUT",
        help="seconds a request may take; then it is cancelled and answered 503",
    )

    # --- server features (flags we cannot honour are declared with supported=: an error naming them)
    embedding: bool = arg(
        False, "--embedding", "--embeddings", env="LLAMA_ARG_EMBEDDINGS", help="serve embeddings (no completions)"
    )
    reranking: bool = arg(
        False, "--rerank", "--reranking", env="LLAMA_ARG_RERANKING", help="serve /rerank (embeddings with rank pooling)"
    )
    pooling: Literal["none", "mean", "cls", "last", "rank"] | None = arg(
        None, "--pooling", env="LLAMA_ARG_POOLING", help="embedding pooling (default: the model's)"
    )
    slot_save_path: str | None = arg(None, "--slot-save-path", help="folder for POST /slots/{id}?action=save|restore")
    context_shift: bool = arg(
        False,
        "--context-shift",
        neg=("--no-context-shift",),
        env="LLAMA_ARG_CONTEXT_SHIFT",
        help="when a slot's context fills, drop older tokens and go on generating",
    )
    cache_reuse: int = arg(
        0,
        "--cache-reuse",
        env="LLAMA_ARG_CACHE_REUSE",
        help="reuse cached chunks of at least N tokens by shifting their KV (0: off)",
    )
    cache_ram: int = arg(
        8192,
        "-cram",
        "--cache-ram",
        env="LLAMA_ARG_CACHE_RAM",
        help="host-memory prompt cache in MiB (-1: no limit, 0: off)",
    )
    cache_idle_slots: bool = arg(
        True,
        "--cache-idle-slots",
        neg=("--no-cache-idle-slots",),
        env="LLAMA_ARG_CACHE_IDLE_SLOTS",
        help="on a new task, save idle slots to the prompt cache (and free them with a unified KV cache)",
    )
    ctx_checkpoints: int = arg(
        32,
        "-ctxcp",
        "--ctx-checkpoints",
        "--swa-checkpoints",
        env="LLAMA_ARG_CTX_CHECKPOINTS",
        help="context checkpoints per slot, for models whose cache cannot be cut back (SWA, recurrent)",
    )
    checkpoint_min_step: int = arg(
        8192,
        "-cms",
        "--checkpoint-min-step",
        env="LLAMA_ARG_CHECKPOINT_MIN_SPACING_NT",
        help="tokens between context checkpoints once a slot holds all it may (0: no minimum)",
    )
    slot_prompt_similarity: float = arg(
        0.1,
        "-sps",
        "--slot-prompt-similarity",
        help="share of a prompt a slot's cache must cover for the slot to be chosen (0: least recently used)",
    )
    sleep_idle_seconds: int = arg(
        -1, "--sleep-idle-seconds", help="free the context after this many idle seconds (-1: never)"
    )
    lora: list[str] | None = arg(None, "--lora", help="LoRA adapter at scale 1 (repeat, or comma-separate, for more)")
    lora_scaled: list[str] | None = arg(
        None, "--lora-scaled", help="LoRA adapter with its scale, FNAME:SCALE (repeat, or comma-separate, for more)"
    )
    lora_init_without_apply: bool = arg(
        False, "--lora-init-without-apply", help="load LoRA adapters at scale 0 (apply them via POST /lora-adapters)"
    )

    @model_validator(mode="after")
    def _check_synth_rates(self) -> ServerSettings:
        rates = self.synth_rates
        if rates and len(rates) != self.spec_draft_n_max:
            raise ValueError(
                f"--spec-synth-rates: synthetic acceptance rates must contain {self.spec_draft_n_max} values "
                f"(--spec-draft-n-max), got {len(rates)}"
            )
        if any(not 0.0 <= r <= 1.0 for r in rates):  # NaN fails too
            raise ValueError("--spec-synth-rates: synthetic acceptance rates must be finite and within [0, 1]")
        if any(b > a for a, b in zip(rates, rates[1:], strict=False)):
            raise ValueError("--spec-synth-rates: synthetic acceptance rates must be monotonically non-increasing")
        return self

    @field_validator("ctx_checkpoints", "checkpoint_min_step")
    @classmethod
    def _not_negative(cls, value: int) -> int:
        if value < 0:
            raise ValueError(f"must be non-negative, got {value}")
        return value

    @field_validator("path")
    @classmethod
    def _existing_folder(cls, value: str | None) -> str | None:
        if value is not None and not (Path(value) / "index.html").is_file():
            raise ValueError(f"--path {value}: expected a folder with an index.html")
        return value

    @field_validator("media_path")
    @classmethod
    def _media_folder(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).is_dir():
            raise ValueError(f"--media-path: not a directory: {value}")
        return value

    @field_validator("lora_scaled")
    @classmethod
    def _checklora_scaled(cls, value: list[str] | None) -> list[str] | None:
        for item in value or []:
            for spec in item.split(","):
                lora_scaled(spec)
        return value

    @model_validator(mode="after")
    def _refuse_what_we_cannot_honour(self) -> ServerSettings:
        for name, info in type(self).model_fields.items():
            extra = info.json_schema_extra or {}
            supported = extra.get("supported", True)  # type: ignore[union-attr]
            if supported is True or getattr(self, name) == info.default:
                continue
            flag = extra["flags"][-1]  # type: ignore[index]
            raise UnsupportedFlagError(f"{flag}: {supported}")
        return self

    # --- derived
    @property
    def aliases(self) -> list[str]:
        """``--alias`` names, sorted: the first names the model (llama-server keeps them in a set)."""
        return sorted({a for a in (self.alias or "").split(",") if a})

    @property
    def hosts(self) -> list[str]:
        return [h for h in self.host.split(",") if h]

    def key_ring(self) -> KeyRing:
        """The API keys of ``--api-key`` and ``--api-key-file`` (the file read now)."""
        return KeyRing.load(self.api_key, self.api_key_file)

    @property
    def synth_rates(self) -> list[float]:
        try:
            return [float(r) for r in (self.spec_synth_rates or "").split(",") if r.strip()]
        except ValueError:
            raise ValueError(f"--spec-synth-rates: not a list of numbers: {self.spec_synth_rates!r}") from None

    @property
    def lora_adapters(self) -> list[tuple[str, float]]:
        """``(path, scale)`` of ``--lora`` then ``--lora-scaled``: the adapters' ids in that order."""
        specs = [(path, 1.0) for item in self.lora or [] for path in item.split(",") if path]
        specs += [lora_scaled(spec) for item in self.lora_scaled or [] for spec in item.split(",") if spec]
        if self.lora_init_without_apply:
            specs = [(path, 0.0) for path, _ in specs]
        return specs

    @property
    def cors_allowed(self) -> str:
        """``--cors-origins`` as given; by default ``*``, but only local pages once tools can run
        commands on this machine (llama-server's rule)."""
        if self.cors_origins is not None:
            return self.cors_origins
        return "localhost" if self.agentic else "*"

    @property
    def n_parallel(self) -> int:
        return 4 if self.parallel < 0 else self.parallel

    @property
    def unified_kv(self) -> bool:
        return self.kv_unified or self.parallel < 0  # llama-server's auto slots share one KV buffer

    def completion_defaults(self) -> CompletionParams:
        """The per-request defaults these flags set (a request's own fields win)."""
        fields: dict[str, Any] = {
            "n_predict": self.n_predict,
            "temperature": self.temp,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "min_p": self.min_p,
            "typical_p": self.typical,
            "seed": self.seed,
            "repeat_last_n": self.repeat_last_n,
            "repeat_penalty": self.repeat_penalty,
            "presence_penalty": self.presence_penalty,
            "frequency_penalty": self.frequency_penalty,
            "dry_multiplier": self.dry_multiplier,
            "mirostat": self.mirostat,
            "ignore_eos": self.ignore_eos,
            "n_keep": self.keep,
            "n_cache_reuse": self.cache_reuse,
            "reasoning_budget_tokens": self.reasoning_budget,
            "verbose": self.verbose,
        }
        if self.reasoning_budget_message is not None:
            fields["reasoning_budget_message"] = self.reasoning_budget_message
        if self.samplers:
            fields["samplers"] = [s for s in self.samplers.split(";") if s]
        if self.grammar:
            fields["grammar"] = self.grammar
        if self.json_schema:
            fields["json_schema"] = json.loads(self.json_schema)
        return CompletionParams.model_validate(fields)
