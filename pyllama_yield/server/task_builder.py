"""From a request to tasks, on the caller's thread: validate the fields, tokenize the prompts (media
too), apply the server's caps, and check that each prompt fits a slot. llama.cpp's vocab is
read-only and the binding releases the GIL, so a long prompt never stalls the loop thread.

The engine holds one (``Engine.tasks``), made from what the loaded model fixes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .._native import lib
from ..common import json_schema_to_grammar
from ..llama import LlamaError, Sampler
from ..mtmd import MediaError
from .embedding import EmbeddingTask, rerank_prompt
from .errors import ContextOverflowError
from .infill import fim_support_error, infill_prompt
from .media import MediaTokens, decode_base64, is_media_cell, multimodal_tokens
from .params import CompletionParams, validation_message
from .sampling import GrammarError
from .task import CompletionTask, tokenize_prompts
from .task_params import TaskParams, resolve

if TYPE_CHECKING:
    from ..llama import Model
    from ..mtmd import Projector

__all__ = ["TaskBuilder", "TaskLimits"]

# distinct request settings whose resolved parameters are kept (a client sends the same ones again
# and again: validating and resolving them costs more than tokenizing a short prompt), and the
# longest such settings as JSON: fields longer than that carry content (infill's files, a large
# schema) that would be kept with them
RESOLVED_KEPT = 64
RESOLVED_KEY_MAX = 4096


@dataclass(frozen=True)
class TaskLimits:
    """What the loaded engine fixes about the tasks it takes."""

    n_parallel: int
    n_ctx_slot: int  # a prompt must be shorter
    n_batch: int
    n_ubatch: int  # an embedding's prompt must fit one
    n_predict_max: int  # --n-predict-max (-1: none)
    n_probs_max: int
    embedding: bool  # an embeddings (or, with pooling "rank", reranking) engine: no completions
    pooling: str


def _fields_key(data: dict[str, Any]) -> str | None:
    """A request's fields but its prompt, as one string; None when they are not plain JSON or
    longer than ``RESOLVED_KEY_MAX``."""
    try:
        key = json.dumps({k: v for k, v in data.items() if k != "prompt"}, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    return key if len(key) <= RESOLVED_KEY_MAX else None


class TaskBuilder:
    """Builds tasks for one loaded model; any thread (it only reads the model and the projector)."""

    def __init__(
        self,
        model: Model,
        projector: Projector | None,
        defaults: CompletionParams,
        limits: TaskLimits,
        eog_tokens: tuple[int, ...],
    ) -> None:
        self.model, self.vocab, self.projector = model, model.vocab, projector
        self.defaults = defaults
        self.limits = limits
        self.eog_tokens = eog_tokens  # read by ``resolve`` (a ``Tokenizer``)
        self._resolved: dict[str, TaskParams] = {}  # by a request's fields but its prompt (any thread)

    # --- the model as a tokenizer (any thread: llama.cpp's vocab is read-only) ----------------
    @property
    def n_vocab(self) -> int:
        return self.model.n_vocab

    def tokenize(self, text: str, add_special: bool = False, parse_special: bool = False) -> list[int]:
        return self.vocab.tokenize(text, add_special=add_special, parse_special=parse_special)

    def piece(self, token: int) -> bytes:
        return self.vocab.token_to_piece(token)

    def detokenize(self, tokens: list[int]) -> str:
        return self.vocab.detokenize(tokens)

    def token_text(self, token: int) -> str:
        """A token's text, special tokens shown (``<bos>``); empty for "no such token" (-1)."""
        return "" if token < 0 else self.vocab.token_to_piece(token, special=True).decode("utf-8", "replace")

    def check_grammar(self, grammar: str) -> None:
        """Raise ``GrammarError`` with llama.cpp's reason when it cannot parse ``grammar`` (GBNF),
        before a request is queued (parsing reads only the vocab: any thread)."""
        try:
            Sampler([lib.llama_sampler_init_grammar(self.vocab.ptr, grammar.encode(), b"root")]).close()
        except LlamaError as exc:
            raise GrammarError(f"invalid grammar: {exc}") from None

    def default_settings(self) -> dict[str, Any]:
        """The generation settings a request gets when it sets nothing (``/props``)."""
        return resolve(self.defaults, self, json_schema_to_grammar, n_parallel=self.limits.n_parallel).settings

    def infill_tokens(self, body: dict[str, Any]) -> list[int]:
        """The FIM prompt of an ``/infill`` request (``input_prefix``, ``input_suffix``,
        ``input_extra``, and ``prompt`` as the start of the middle)."""
        error = fim_support_error(self.vocab)
        if error:
            raise NotImplementedError(error)
        prompt = body.get("prompt", "")
        if not isinstance(prompt, str):
            raise ValueError('"prompt" must be a string')
        for name in ("input_prefix", "input_suffix"):
            if name not in body:
                raise ValueError(f'"{name}" is required')
        extra = body.get("input_extra", [])
        if not isinstance(extra, list):
            raise ValueError('"input_extra" must be an array of {"filename": string, "text": string}')
        for chunk in extra:
            if not isinstance(chunk, dict) or not isinstance(chunk.get("text"), str):
                raise ValueError('extra_context chunk must contain a "text" field with a string value')
            if not isinstance(chunk.get("filename", ""), str):
                raise ValueError('extra_context chunk\'s "filename" field must be a string')
        return infill_prompt(
            self.vocab,
            body["input_prefix"],
            body["input_suffix"],
            extra,
            self.tokenize(prompt, False, True),
            n_batch=self.limits.n_batch,
            n_predict=self.defaults.n_predict,
            n_ctx=self.limits.n_ctx_slot,
        )

    def make_tasks(
        self, data: dict[str, Any] | CompletionParams, prompt: Any = None, *, params: CompletionParams | None = None
    ) -> list[CompletionTask]:
        """A request's JSON → one task per prompt and per choice (``n``), tokenized here, on the
        calling thread. ``prompt`` defaults to ``data["prompt"]``. Raises ``ValueError`` with the
        field and the reason for a bad request."""
        if self.limits.embedding:
            raise NotImplementedError("This server does not support completions. Start it without `--embeddings`")
        key, kept = None, None
        if params is None:
            if not isinstance(data, dict):
                raise ValueError("the request must be a JSON object")
            key = _fields_key(data)
            kept = self._resolved.get(key) if key is not None else None
            if kept is None:
                try:
                    params = CompletionParams.model_validate(data).over(self.defaults)
                except ValidationError as exc:
                    raise ValueError(validation_message(exc)) from None
        if params is not None:
            params = self._apply_caps(params)
        if prompt is None:
            prompt = data.get("prompt") if isinstance(data, dict) else None
        if prompt is None:
            raise ValueError('"prompt" is required')
        if kept is None:
            assert params is not None
            kept = resolve(params, self, json_schema_to_grammar, n_parallel=self.limits.n_parallel)
            if key is not None:  # a refused request raised above: nothing is kept for it
                if len(self._resolved) >= RESOLVED_KEPT:
                    self._resolved.clear()  # settings that change per request: none kept for long
                self._resolved[key] = kept
        task_params = replace(kept)  # the caller's own: the bridge sets report_position on it
        prompts = tokenize_prompts(prompt, lambda text, bos: self.tokenize(text, bos, True), self._multimodal)
        tasks = []
        for i, tokens in enumerate(prompts):
            media = tokens.media if isinstance(tokens, MediaTokens) else {}
            self.check_prompt(tokens, with_media=bool(media))
            if media and task_params.prompt_logprobs >= 0:
                raise ValueError("prompt_logprobs is not supported for prompts with media")
            text = prompt if isinstance(prompt, str) else ""
            for j in range(task_params.n_cmpl):
                index = i * task_params.n_cmpl + j
                tasks.append(CompletionTask(tokens, task_params, index=index, prompt_text=text, media=media))
        return tasks

    def count_prompt_tokens(self, prompt: Any) -> int:
        """The KV cells a prompt takes (its media's too): what ``/input_tokens`` routes report."""
        return len(tokenize_prompts(prompt, lambda text, bos: self.tokenize(text, bos, True), self._multimodal)[0])

    @property
    def _multimodal(self) -> Callable[[str, list[Any]], MediaTokens] | None:
        """How ``tokenize_prompts`` reads a prompt with ``multimodal_data``; None without --mmproj."""
        projector = self.projector
        if projector is None:
            return None

        def tokens(text: str, files: list[Any]) -> MediaTokens:
            data = [f if isinstance(f, bytes) else decode_base64(f) if isinstance(f, str) else b"" for f in files]
            try:
                return multimodal_tokens(projector, text, data)
            except MediaError as exc:
                raise ValueError(str(exc)) from None

        return tokens

    def _apply_caps(self, params: CompletionParams) -> CompletionParams:
        """The server's caps on what one request may ask for (``--n-predict-max``, ``--n-probs-max``)."""
        for name in ("n_probs", "prompt_logprobs"):
            if getattr(params, name) > self.limits.n_probs_max:
                raise ValueError(
                    f"{name} {getattr(params, name)} is over this server's limit of {self.limits.n_probs_max}"
                )
        cap = self.limits.n_predict_max
        if cap >= 0:
            if params.n_predict > cap:
                raise ValueError(f"n_predict {params.n_predict} is over this server's limit of {cap}")
            if params.n_predict < 0:
                params = params.model_copy(update={"n_predict": cap})
        return params

    def make_embedding_tasks(self, inputs: Any, normalize: int = 2, any_model: bool = False) -> list[EmbeddingTask]:
        """One task per input (the prompt forms of completions); each must fit one ubatch.
        ``any_model``: a generation engine embeds too (beside its slots, mean-pooled, as Ollama
        does); llama-server's routes refuse that."""
        if not (self.limits.embedding or any_model):
            raise NotImplementedError("This server does not support embeddings. Start it with `--embeddings`")
        prompts = tokenize_prompts(inputs, lambda text, bos: self.tokenize(text, bos, True), self._multimodal)
        tasks = []
        for i, tokens in enumerate(prompts):
            if not tokens:
                raise ValueError("Input content cannot be empty")
            media = tokens.media if isinstance(tokens, MediaTokens) else {}
            self.check_prompt(tokens, with_media=bool(media))
            if len(tokens) > self.limits.n_ubatch:
                raise ValueError(
                    f"input ({len(tokens)} tokens) is too large to process. increase the physical batch size "
                    f"(current batch size: {self.limits.n_ubatch})"
                )
            tasks.append(EmbeddingTask(tokens, index=i, normalize=normalize, media=media))
        return tasks

    def make_rerank_tasks(self, query: str, documents: list[str]) -> list[EmbeddingTask]:
        """One task per document: the reranker scores the (query, document) pair."""
        if not self.limits.embedding or self.limits.pooling != "rank":
            raise NotImplementedError("This server does not support reranking. Start it with `--reranking`")
        tasks = []
        for i, doc in enumerate(documents):
            tokens = rerank_prompt(self.model, self.vocab, query, doc)
            self.check_prompt(tokens)
            if len(tokens) > self.limits.n_ubatch:
                raise ValueError(
                    f"input ({len(tokens)} tokens) is too large to process. increase the physical batch size"
                )
            tasks.append(EmbeddingTask(tokens, index=i, normalize=-1, rerank=True))
        return tasks

    def check_prompt(self, tokens: list[int], with_media: bool = False) -> None:
        if not tokens:
            raise ValueError("the prompt is empty")
        n_vocab = self.vocab.n_tokens
        bad = next((t for t in tokens if not (0 <= t < n_vocab or (with_media and is_media_cell(t)))), None)
        if bad is not None:
            raise ValueError(f"token id {bad} out of range [0, {self.vocab.n_tokens})")
        if len(tokens) >= self.limits.n_ctx_slot:
            raise ContextOverflowError(len(tokens), self.limits.n_ctx_slot)
