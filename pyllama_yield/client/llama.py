"""``Llama``: the engine in-process, with llama-cpp-python's names and result shapes.

One engine serves every caller: calls from several Python threads (or asyncio tasks) at once are
batched continuously on the engine's loop thread, where llama-cpp-python's ``Llama`` must be
serialized by its caller. Requests are built on the calling thread (tokenizing and chat templates
release the GIL); the loop thread only decodes and samples.
"""

from __future__ import annotations

import asyncio
import os
import struct
import tempfile
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..mtmd import Chunk
from ..queue import Result, TaskType
from ..server import token_state
from ..server.async_reader import AsyncReader
from ..server.chat import openai_chat_fields
from ..server.engine import Engine
from ..server.params import DEFAULT_SEED
from ..server.results import CompletionFinal, EmbeddingVectors, Indexed, expect
from ..server.task import CompletionTask
from . import shapes
from .answers import ChatAnswer, CompletionAnswer, raise_for_error
from .grammar import LlamaGrammar, LlamaState
from .many import answer_in_order
from .options import CHAT_DEFAULTS, COMPLETION_DEFAULTS, engine_config_from_kwargs, sampling_fields
from .types import ChatCompletion, ChatCompletionChunk, Completion, CompletionChunk, EmbeddingResponse

R = TypeVar("R", bound=Indexed)

__all__ = ["Llama"]

Answer = CompletionAnswer | ChatAnswer


class Llama:
    """A GGUF model served by ``n_parallel`` slots (ours; llama-cpp-python has one sequence).
    The other arguments are llama-cpp-python's; those this engine cannot honour are refused
    when set, never ignored. ``n_ctx`` is each slot's context."""

    def __init__(
        self, model_path: str | os.PathLike[str], *, n_parallel: int = 1, seed: int = DEFAULT_SEED, **kwargs: Any
    ) -> None:
        path = Path(model_path)
        if not path.is_file():
            raise ValueError(f"Model path does not exist: {model_path}")
        self.model_path = str(model_path)
        self._engine = Engine(engine_config_from_kwargs(path, n_parallel, seed, **kwargs))
        # a Llama dropped without close() (or whose start fails) still stops its loop thread and frees the model
        self._finalizer = weakref.finalize(self, self._engine.stop)
        self._turn_stops = _unknown_turn_ends(self._engine)
        self._engine.start()

    @classmethod
    def from_pretrained(
        cls,
        repo_id: str,
        filename: str | None,
        additional_files: list[str] | None = None,
        local_dir: str | os.PathLike[str] | None = None,
        local_dir_use_symlinks: bool | str = "auto",
        cache_dir: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> Llama:
        """llama-cpp-python's: the file of Hugging Face repo ``repo_id`` that the glob ``filename``
        matches (exactly one), and ``additional_files`` (e.g. the other shards), downloaded through
        ``huggingface_hub`` into its cache (``cache_dir``) or ``local_dir``; ``HF_HUB_OFFLINE=1``
        reads the cache only. The other arguments go to :class:`Llama`."""
        from ..hub import download_matching

        if filename is None:
            raise ValueError("filename is required: a glob that matches one GGUF file of the repo")
        if local_dir_use_symlinks != "auto":  # huggingface_hub dropped it: refused, not ignored
            raise ValueError("local_dir_use_symlinks is no longer supported by huggingface_hub")
        cache = None if cache_dir is None else os.fspath(cache_dir)
        paths = download_matching(repo_id, filename, additional_files, cache_dir=cache, local_dir=local_dir)
        return cls(paths[0], **kwargs)

    # --- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the loop thread and free the model; calls waiting on it raise."""
        self._finalizer()

    def __enter__(self) -> Llama:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    # --- the model and its tokenizer ----------------------------------------------------------
    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return self._engine.vocab.tokenize(text, add_special=add_bos, parse_special=special)

    def detokenize(self, tokens: list[int], prev_tokens: list[int] | None = None, special: bool = False) -> bytes:
        vocab = self._engine.vocab
        out = b"".join(vocab.token_to_piece(t, special=special) for t in tokens)
        if tokens and tokens[0] == vocab.bos and out.startswith(b" "):
            out = out[1:]  # the space a SentencePiece vocab puts after BOS, as llama-cpp-python drops it
        return out

    def token_bos(self) -> int:
        return self._engine.vocab.bos

    def token_eos(self) -> int:
        return self._engine.vocab.eos

    def n_ctx(self) -> int:
        """The context of one slot (one call)."""
        return self._engine.n_ctx_slot

    def n_vocab(self) -> int:
        return self._engine.model.n_vocab

    def n_embd(self) -> int:
        return self._engine.model.n_embd

    @property
    def metadata(self) -> dict[str, str]:
        return self._engine.model.metadata()

    # --- completions --------------------------------------------------------------------------
    def __call__(self, prompt: str | list[int], **kwargs: Any) -> Completion | Iterator[CompletionChunk]:
        return self.create_completion(prompt, **kwargs)

    def create_completion(
        self, prompt: str | list[int], stream: bool = False, **kwargs: Any
    ) -> Completion | Iterator[CompletionChunk]:
        """llama-cpp-python's ``create_completion``: ``suffix``, ``max_tokens`` (16), ``temperature``,
        ``top_p``, ``min_p``, ``typical_p``, ``top_k``, ``logprobs``, ``echo``, ``stop``, penalties,
        ``seed``, ``mirostat_*``, ``grammar``, ``logit_bias``; a stream is an iterator of chunks."""
        tasks, answer = self._completion_tasks(prompt, stream, **kwargs)
        return self._stream(tasks, answer) if stream else answer.final(self._collect(tasks, CompletionFinal))

    async def acreate_completion(
        self, prompt: str | list[int], stream: bool = False, **kwargs: Any
    ) -> Completion | AsyncIterator[CompletionChunk]:
        """:meth:`create_completion` for asyncio: the event loop never blocks."""
        tasks, answer = await asyncio.to_thread(self._completion_tasks, prompt, stream, **kwargs)
        return self._astream(tasks, answer) if stream else answer.final(await self._acollect(tasks, CompletionFinal))

    def create_completions(
        self, prompts: Sequence[str | list[int]], *, progress: bool | None = None, **kwargs: Any
    ) -> list[Completion]:
        """:meth:`create_completion` for many prompts, the answers in their order: all slots kept
        busy (one more request in flight than slots), a progress bar on a terminal (``progress``
        True/False forces it on/off)."""

        def one(prompt: str | list[int]) -> Completion:
            tasks, answer = self._completion_tasks(prompt, False, **kwargs)
            return answer.final(self._collect(tasks, CompletionFinal))

        return answer_in_order(one, prompts, self._engine.n_parallel + 1, progress, "completions")

    def _completion_tasks(
        self,
        prompt: str | list[int],
        stream: bool,
        *,
        suffix: str | None = None,
        logprobs: int | None = None,
        echo: bool = False,
        model: str | None = None,
        grammar: LlamaGrammar | None = None,
        **sampling: Any,
    ) -> tuple[list[CompletionTask], CompletionAnswer]:
        body = sampling_fields(COMPLETION_DEFAULTS, **sampling)
        if logprobs is not None:
            body["n_probs"] = max(logprobs, 1)  # the sampled token's own logprob comes with the top ones
            if echo and not stream:
                body["prompt_logprobs"] = logprobs  # the echoed prompt's tokens get theirs too
        if grammar is not None:
            body["grammar"] = self._checked_grammar(grammar)
        if suffix is not None:
            prompt = self._engine.tasks.infill_tokens({"input_prefix": prompt, "input_suffix": suffix})
        tasks = self._engine.tasks.make_tasks({**body, "stream": stream, "cache_prompt": True}, prompt)
        text = prompt if isinstance(prompt, str) else self.detokenize(prompt).decode("utf-8", "replace")
        first = None  # the echoed prompt's first listed token: none for a BOS
        if tasks[0].prompt_tokens[0] != self._engine.vocab.bos:
            first = self._engine.vocab.token_to_piece(tasks[0].prompt_tokens[0]).decode("utf-8", "replace")
        echo = echo and not stream  # llama-cpp-python does not echo in streams either
        return tasks, CompletionAnswer(shapes.Head(model or self.model_path), text, echo, logprobs, first)

    def _checked_grammar(self, grammar: LlamaGrammar | str) -> str:
        text = str(grammar)
        self._engine.tasks.check_grammar(text)
        return text

    # --- chats --------------------------------------------------------------------------------
    def create_chat_completion(
        self, messages: list[dict[str, Any]], stream: bool = False, **kwargs: Any
    ) -> ChatCompletion | Iterator[ChatCompletionChunk]:
        """llama-cpp-python's ``create_chat_completion``: the model's chat template (llama.cpp's
        Jinja engine), ``tools``/``tool_choice`` (tool calls parsed for every template family that
        has a format; a named function is forced by its schema where the template has none),
        ``response_format`` with a JSON schema, ``logprobs``/``top_logprobs``, ``n``, ``stream``."""
        tasks, answer = self._chat_tasks(messages, stream, **kwargs)
        return self._stream(tasks, answer) if stream else answer.final(self._collect(tasks, CompletionFinal))

    def create_chat_completions(
        self, conversations: Sequence[list[dict[str, Any]]], *, progress: bool | None = None, **kwargs: Any
    ) -> list[ChatCompletion]:
        """:meth:`create_chat_completion` for many conversations, the answers in their order (see
        :meth:`create_completions`)."""

        def one(messages: list[dict[str, Any]]) -> ChatCompletion:
            tasks, answer = self._chat_tasks(messages, False, **kwargs)
            return answer.final(self._collect(tasks, CompletionFinal))

        return answer_in_order(one, conversations, self._engine.n_parallel + 1, progress, "chats")

    async def acreate_chat_completion(
        self, messages: list[dict[str, Any]], stream: bool = False, **kwargs: Any
    ) -> ChatCompletion | AsyncIterator[ChatCompletionChunk]:
        tasks, answer = await asyncio.to_thread(self._chat_tasks, messages, stream, **kwargs)
        return self._astream(tasks, answer) if stream else answer.final(await self._acollect(tasks, CompletionFinal))

    def _chat_tasks(
        self,
        messages: list[dict[str, Any]],
        stream: bool,
        *,
        functions: list[dict[str, Any]] | None = None,
        function_call: str | dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        response_format: dict[str, Any] | None = None,
        model: str | None = None,
        grammar: LlamaGrammar | None = None,
        logprobs: bool | None = None,
        top_logprobs: int | None = None,
        n: int = 1,
        **sampling: Any,
    ) -> tuple[list[CompletionTask], ChatAnswer]:
        if functions is not None and tools is None:  # the legacy form
            tools = [{"type": "function", "function": f} for f in functions]
        if function_call is not None and tool_choice is None:
            name = function_call.get("name") if isinstance(function_call, dict) else None
            tool_choice = {"type": "function", "function": {"name": name}} if name else function_call
        body = sampling_fields(CHAT_DEFAULTS, **sampling)
        body.update(messages=messages, stream=stream, n=n, cache_prompt=True)
        if tools is not None:
            body.update(tools=tools, tool_choice=tool_choice or "auto")
        if response_format is not None:
            body["response_format"] = response_format
        if grammar is not None:
            body["grammar"] = self._checked_grammar(grammar)
        if logprobs:
            body.update(logprobs=True, top_logprobs=max(top_logprobs or 0, 1))
        if response_format is not None:  # a schema llama.cpp cannot convert is a GrammarError, up front
            schema = openai_chat_fields({"response_format": response_format}).get("json_schema")
            if schema is not None:
                LlamaGrammar.from_json_schema(schema)
        # the engine's one chat path, as the HTTP routes take it; in-process, a file:// URL may
        # name any file this process can read, and a forced function works as in llama-cpp-python
        chats = self._engine.chats
        plan = chats.plan(body, media_path="/", extra_stops=self._turn_stops, force_named_tool=True)
        head = shapes.Head(model or self.model_path, prefix="chatcmpl-")
        n_top = (top_logprobs or 0) if logprobs else None
        return chats.tasks(plan), ChatAnswer(head, plan.parse, n_top, plan.forced)

    # --- embeddings ---------------------------------------------------------------------------
    def create_embedding(self, input: str | list[str], model: str | None = None) -> EmbeddingResponse:  # noqa: A002
        """llama-cpp-python's embeddings response (not normalized, as there)."""
        vectors, n_tokens = self._embed(input, normalize=False, truncate=True)
        return {
            "object": "list",
            "data": [{"object": "embedding", "embedding": v, "index": i} for i, v in enumerate(vectors)],
            "model": model or self.model_path,
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
        }

    def embed(
        self,
        input: str | list[str],  # noqa: A002
        normalize: bool = False,
        truncate: bool = True,
        return_count: bool = False,
    ) -> Any:
        """One vector per input (per token with pooling ``none``): a list for a str, a list of
        those for a list; ``normalize``: L2."""
        vectors, n_tokens = self._embed(input, normalize, truncate)
        out = vectors[0] if isinstance(input, str) else vectors
        return (out, n_tokens) if return_count else out

    def _embed(self, inputs: str | list[str], normalize: bool, truncate: bool) -> tuple[list[Any], int]:
        engine = self._engine
        if not engine.embedding:
            raise RuntimeError("Llama model must be created with embedding=True to call this method")
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        prompts = [self.tokenize(t.encode("utf-8"), add_bos=True) for t in texts]
        if truncate:
            prompts = [p[: engine.n_ubatch] for p in prompts]
        finals = self._collect(engine.tasks.make_embedding_tasks(prompts, 2 if normalize else -1), EmbeddingVectors)
        pooled = engine.pooling != "none"
        vectors = [p.embedding[0] if pooled else p.embedding for p in finals]
        return vectors, sum(p.tokens_evaluated for p in finals)

    # --- state --------------------------------------------------------------------------------
    def save_state(self) -> LlamaState:
        """Every slot's tokens and KV cache (wait for calls in flight to finish first)."""
        state = LlamaState(seed=self._engine.defaults.seed)
        with tempfile.TemporaryDirectory(prefix="pyllama-state-") as tmp:
            for i in range(self._engine.n_parallel):
                path = Path(tmp) / f"slot{i}.bin"
                self._call(TaskType.SLOT_SAVE, {"id_slot": i, "filename": str(path)})
                data = path.read_bytes()
                state.slot_states.append(data)
                state.slot_tokens.append(_state_tokens(data))
        return state

    def load_state(self, state: LlamaState) -> None:
        """Put back what :meth:`save_state` kept (a later prompt with the same start reuses it)."""
        if len(state.slot_states) > self._engine.n_parallel:
            raise ValueError(f"the state has {len(state.slot_states)} slots; this Llama has {self._engine.n_parallel}")
        with tempfile.TemporaryDirectory(prefix="pyllama-state-") as tmp:
            for i, data in enumerate(state.slot_states):
                path = Path(tmp) / f"slot{i}.bin"
                path.write_bytes(data)
                self._call(TaskType.SLOT_RESTORE, {"id_slot": i, "filename": str(path)})

    def _call(self, task_type: TaskType, payload: Any) -> Result:
        res = self._engine.call(task_type, payload)
        raise_for_error(res)
        return res

    # --- reading results ----------------------------------------------------------------------
    def _results(self, tasks: list[Any]) -> Iterator[Result]:
        """Every result of ``tasks`` as it comes; leaving early cancels what has not finished."""
        if self.closed:
            raise RuntimeError("this Llama is closed")
        with self._engine.submit(tasks) as reader:
            while reader.has_next():
                res = reader.next(lambda: self.closed)
                if res is None:
                    raise RuntimeError("this Llama was closed while a call was waiting")
                raise_for_error(res)
                yield res

    def _collect(self, tasks: list[Any], kind: type[R]) -> list[R]:
        """The final results of ``tasks`` (each a ``kind``), in the request's order."""
        finals = [expect(r, kind) for r in self._results(tasks) if r.is_final]
        return sorted(finals, key=lambda p: p.index)

    def _stream(self, tasks: list[Any], answer: Answer) -> Iterator[Any]:
        for res in self._results(tasks):
            yield from answer.chunks(res)

    async def _aresults(self, tasks: list[Any]) -> AsyncIterator[Result]:
        if self.closed:
            raise RuntimeError("this Llama is closed")
        n_final = 0
        reader = self._engine.submit(tasks)
        with AsyncReader(reader, poll_interval_s=0.5) as results:
            while n_final < len(tasks):
                batch = await results.next_batch(lambda: self.closed)
                if not batch:
                    raise RuntimeError("this Llama was closed while a call was waiting")
                for res in batch:
                    raise_for_error(res)
                    n_final += res.is_final
                    yield res

    async def _acollect(self, tasks: list[Any], kind: type[R]) -> list[R]:
        finals = [expect(r, kind) async for r in self._aresults(tasks) if r.is_final]
        return sorted(finals, key=lambda p: p.index)

    async def _astream(self, tasks: list[Any], answer: Answer) -> AsyncIterator[Any]:
        async for res in self._aresults(tasks):
            for chunk in answer.chunks(res):
                yield chunk


def _unknown_turn_ends(engine: Engine) -> list[str]:
    """ChatML's end-of-turn marker as a stop string when the template uses it but the vocab has
    no such end-of-generation token (ChatML is the fallback for models without a template), as
    llama-cpp-python's chatml format stops on it."""
    marker = "<|im_end|>"
    if marker not in engine.chat.info["source"]:
        return []
    tokens = engine.tasks.tokenize(marker, False, True)
    return [] if len(tokens) == 1 and tokens[0] in engine.eog_tokens else [marker]


def _state_tokens(data: bytes) -> list[int]:
    """The tokens at the head of a llama.cpp sequence-state file (magic, version, count, tokens),
    unpacked from llama-server's packed format the slot files use (``server/token_state.py``)."""
    n = struct.unpack_from("<I", data, 8)[0] if len(data) >= 12 else 0
    packed = list(struct.unpack_from(f"<{n}i", data, 12)) if n else []
    return token_state.unpack(packed, Chunk.load)[0]
