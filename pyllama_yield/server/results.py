"""What the engine's tasks send back, one dataclass per kind of result, built on the loop thread.

A completion streams ``TokenStep``s (and, with ``return_progress``, ``PromptProgress``) and ends
with a ``CompletionFinal``; an embedding task sends ``EmbeddingVectors`` or a ``RerankScore``;
slot tasks send ``SlotFileDone``/``SlotErased``; a metrics task a ``MetricsSnapshot``; a failed
task an ``errors.EngineFailure``. ``native()`` gives llama-server's native (``/completion``)
JSON; the OpenAI and Anthropic routes read the fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, TypeVar

from ..queue import Result
from .probs import TokenProb
from .slot import Slot, StopType, now

__all__ = [
    "CompletionFinal",
    "CompletionResult",
    "EmbeddingVectors",
    "Indexed",
    "MetricsSnapshot",
    "PromptProgress",
    "RerankScore",
    "SlotErased",
    "SlotFileDone",
    "Timings",
    "TokenStep",
    "completion_step",
    "expect",
    "final_result",
    "progress_result",
    "timings",
    "token_step",
    "usage",
]


@dataclass(frozen=True)
class Timings:
    """llama-server's ``timings`` of an answer so far: prompt time up to the last prompt batch;
    generation rates over decode steps, since the first token comes free with the prompt's logits."""

    cache_n: int
    prompt_n: int
    prompt_ms: float
    predicted_n: int
    predicted_ms: float
    draft_n: int = 0  # speculative decoding: drafted tokens, and how many the target accepted
    draft_n_accepted: int = 0

    @property
    def steps(self) -> int:
        """Decode steps of the generation: its first token came with the prompt's logits."""
        return max(self.predicted_n - 1, 0)

    @property
    def prompt_per_second(self) -> float:
        return self.prompt_n / self.prompt_ms * 1e3 if self.prompt_ms > 0 else 0.0

    @property
    def predicted_per_second(self) -> float:
        return self.steps / self.predicted_ms * 1e3 if self.predicted_ms > 0 else 0.0

    def json(self) -> dict[str, Any]:
        steps = self.steps
        out: dict[str, Any] = {
            "cache_n": self.cache_n,
            "prompt_n": self.prompt_n,
            "prompt_ms": self.prompt_ms,
            "prompt_per_token_ms": self.prompt_ms / self.prompt_n if self.prompt_n else 0.0,
            "prompt_per_second": self.prompt_per_second,
            "predicted_n": self.predicted_n,
            "predicted_ms": self.predicted_ms,
            "predicted_per_token_ms": self.predicted_ms / steps if steps else 0.0,
            "predicted_per_second": self.predicted_per_second,
        }
        if self.draft_n:
            out["draft_n"] = self.draft_n
            out["draft_n_accepted"] = self.draft_n_accepted
        return out


def timings(s: Slot) -> Timings:
    return Timings(
        s.prompt.n_cached,
        s.prompt.n_processed,
        s.prompt_seconds() * 1e3,
        len(s.generated.tokens),
        s.gen_seconds() * 1e3,
        s.draft.n_total,
        s.draft.n_accepted,
    )


@dataclass(frozen=True)
class TokenStep:
    """One sampled token of a streamed completion, with the text it lets out (may be empty)."""

    index: int  # the task's place in its request (prompt x choice)
    content: str
    tokens: list[int]
    id_slot: int
    tokens_predicted: int
    tokens_evaluated: int  # the prompt's tokens
    n_prompt_tokens_cache: int  # of which came from the cache
    timings: Timings | None = None  # with ``timings_per_token``
    probs: list[TokenProb] | None = None  # this token's ``completion_probabilities``

    stop = False

    def followed_by(self, later: TokenStep) -> TokenStep:
        """This step and the next of the same task as one."""
        probs = None if self.probs is None and later.probs is None else [*(self.probs or []), *(later.probs or [])]
        return replace(later, content=self.content + later.content, tokens=self.tokens + later.tokens, probs=probs)

    def native(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "content": self.content,
            "tokens": self.tokens,
            "stop": False,
            "id_slot": self.id_slot,
            "tokens_predicted": self.tokens_predicted,
            "tokens_evaluated": self.tokens_evaluated,
        }
        if self.timings is not None:
            out["timings"] = self.timings.json()
        if self.probs is not None:
            out["completion_probabilities"] = [e.json() for e in self.probs]
        return out


@dataclass(frozen=True)
class PromptProgress:
    """A ``return_progress`` event of a streamed completion: how far prompt processing is."""

    index: int
    id_slot: int
    tokens_evaluated: int
    n_prompt_tokens_cache: int
    total: int
    cache: int
    processed: int
    time_ms: float
    timings: Timings | None = None

    content = ""
    probs = None
    stop = False

    @property
    def prompt_progress(self) -> dict[str, Any]:
        return {"total": self.total, "cache": self.cache, "processed": self.processed, "time_ms": self.time_ms}

    def native(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "content": "",
            "tokens": [],
            "stop": False,
            "id_slot": self.id_slot,
            "tokens_predicted": 0,
            "tokens_evaluated": self.tokens_evaluated,
            "prompt_progress": self.prompt_progress,
        }
        if self.timings is not None:
            out["timings"] = self.timings.json()
        return out


@dataclass(frozen=True)
class CompletionFinal:
    """A completion's end: the text not streamed yet (all of it when not streaming), why it
    stopped, the counts and timings."""

    index: int
    content: str
    tokens: list[int]  # every generated token with ``return_tokens``
    id_slot: int
    tokens_predicted: int
    tokens_evaluated: int
    n_prompt_tokens_cache: int
    generation_settings: dict[str, Any]
    prompt: str
    has_new_line: bool
    truncated: bool
    stop_type: str  # a StopType value: "eos", "word", "limit" or "none"
    stopping_word: str
    tokens_cached: int
    timings: Timings
    probs: list[TokenProb] | None = None  # every token's, when not streaming
    prompt_probs: list[TokenProb] | None = None  # with ``prompt_logprobs``

    stop = True

    @property
    def finish_reason(self) -> Literal["stop", "length"]:
        """OpenAI's name for why it stopped: an end-of-generation token or a stop word is
        ``stop``, anything else ``length``."""
        return "stop" if self.stop_type in ("eos", "word") else "length"

    def native(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "content": self.content,
            "tokens": self.tokens,
            "id_slot": self.id_slot,
            "stop": True,
            "tokens_predicted": self.tokens_predicted,
            "tokens_evaluated": self.tokens_evaluated,
            "generation_settings": self.generation_settings,
            "prompt": self.prompt,
            "has_new_line": self.has_new_line,
            "truncated": self.truncated,
            "stop_type": self.stop_type,
            "stopping_word": self.stopping_word,
            "tokens_cached": self.tokens_cached,
            "timings": self.timings.json(),
        }
        if self.probs is not None:
            out["completion_probabilities"] = [e.json() for e in self.probs]
        if self.prompt_probs is not None:
            out["prompt_probabilities"] = [e.json() for e in self.prompt_probs]
        return out


CompletionResult = TokenStep | PromptProgress | CompletionFinal  # what a completion task sends


@dataclass(frozen=True)
class EmbeddingVectors:
    """An embedding task's answer: one pooled vector, or one per token with pooling ``none``."""

    index: int
    embedding: list[list[float]]
    tokens_evaluated: int

    def native(self) -> dict[str, Any]:
        return {"index": self.index, "embedding": self.embedding, "tokens_evaluated": self.tokens_evaluated}


@dataclass(frozen=True)
class RerankScore:
    index: int
    score: float
    tokens_evaluated: int

    def native(self) -> dict[str, Any]:
        return {"index": self.index, "score": self.score, "tokens_evaluated": self.tokens_evaluated}


@dataclass(frozen=True)
class SlotFileDone:
    """A slot saved to a file (``action`` "save") or restored from one ("restore")."""

    action: str
    id_slot: int
    filename: str  # the name the client gave
    n_tokens: int
    n_bytes: int
    ms: float

    def native(self) -> dict[str, Any]:
        tokens, size = ("n_saved", "n_written") if self.action == "save" else ("n_restored", "n_read")
        return {
            "id_slot": self.id_slot,
            "filename": self.filename,
            tokens: self.n_tokens,
            size: self.n_bytes,
            "timings": {f"{self.action}_ms": self.ms},
        }


@dataclass(frozen=True)
class SlotErased:
    id_slot: int
    n_erased: int

    def native(self) -> dict[str, Any]:
        return {"id_slot": self.id_slot, "n_erased": self.n_erased}


@dataclass(frozen=True)
class MetricsSnapshot:
    """The counters and slots as the loop thread last published them (``metrics.Stats``)."""

    values: dict[str, Any]


class Indexed(Protocol):
    """A result that belongs to one of a request's tasks (its prompt x choice, or its input)."""

    @property
    def index(self) -> int: ...


P = TypeVar("P")


def expect(result: Result, kind: type[P]) -> P:
    """The result's payload, checked to be the kind the caller's task sends (a mix-up is a bug)."""
    if not isinstance(result.payload, kind):
        raise TypeError(f"task {result.id} sent {type(result.payload).__name__}, not {kind.__name__}")
    return result.payload


def coalesce_steps(results: list[Result]) -> list[Result]:
    """Tokens of one task that came together, as one step each run of them (their text joined,
    their tokens and probabilities in order, the latest counts): a reader that fell behind the
    generation catches up in one render, not one per token. A chat answer's render parses the
    whole text so far, so one per token would fall further behind as the answer grows."""
    out: list[Result] = []
    for r in results:
        prev = out[-1].payload if out and out[-1].id == r.id and not out[-1].is_final else None
        if isinstance(prev, TokenStep) and isinstance(r.payload, TokenStep) and not r.is_final and not r.is_error:
            out[-1] = Result(r.id, prev.followed_by(r.payload), is_final=False)
        else:
            out.append(r)
    return out


def completion_step(result: Result) -> CompletionResult:
    """A completion task's result: a token, a progress event, or its end."""
    p = result.payload
    if not isinstance(p, (TokenStep, PromptProgress, CompletionFinal)):
        raise TypeError(f"task {result.id} sent {type(p).__name__}, not a completion's result")
    return p


def token_step(s: Slot, token: int, content: str, probs: TokenProb | None) -> TokenStep:
    task = s.completion
    return TokenStep(
        index=task.index,
        content=content,
        tokens=[token],
        id_slot=s.id,
        tokens_predicted=len(s.generated.tokens),
        tokens_evaluated=len(s.prompt.tokens),
        n_prompt_tokens_cache=s.prompt.n_cached,
        timings=timings(s) if task.params.timings_per_token else None,
        probs=[probs] if probs is not None else None,
    )


def progress_result(s: Slot) -> PromptProgress:
    task = s.completion
    return PromptProgress(
        index=task.index,
        id_slot=s.id,
        tokens_evaluated=len(s.prompt.tokens),
        n_prompt_tokens_cache=s.prompt.n_cached,
        total=len(s.prompt.tokens),
        cache=s.prompt.n_cached,
        processed=s.prompt.n_done,
        time_ms=(now() - s.t_start) * 1e3,
        timings=timings(s) if task.params.timings_per_token else None,
    )


def final_result(s: Slot, stop: StopType, content: str) -> CompletionFinal:
    task = s.completion
    p = task.params
    return CompletionFinal(
        index=task.index,
        content=content,
        tokens=list(s.generated.tokens) if p.return_tokens else [],
        id_slot=s.id,
        tokens_predicted=len(s.generated.tokens),
        tokens_evaluated=len(s.prompt.tokens),
        n_prompt_tokens_cache=s.prompt.n_cached,
        generation_settings=p.settings,
        prompt=task.prompt_text,
        has_new_line="\n" in s.generated.text.text,
        truncated=s.generated.truncated,
        stop_type=stop.value,
        stopping_word=s.generated.text.stopping_word,
        tokens_cached=len(s.memory.tokens),
        timings=timings(s),
        probs=s.generated.probs if not p.stream and s.generated.probs else None,
        prompt_probs=s.prompt.probs if p.prompt_logprobs >= 0 else None,
    )


def usage(finals: Sequence[CompletionFinal], n_choices: int = 1) -> dict[str, Any]:
    """A request's token counts as OpenAI reports them: each prompt once however many choices
    (``n``) it has (a task's index is prompt × n + choice), and every choice's generated tokens."""
    prompts = {f.index // n_choices: f for f in finals}
    n_prompt = sum(f.tokens_evaluated for f in prompts.values())
    n_gen = sum(f.tokens_predicted for f in finals)
    return {
        "completion_tokens": n_gen,
        "prompt_tokens": n_prompt,
        "total_tokens": n_gen + n_prompt,
        "prompt_tokens_details": {"cached_tokens": sum(f.n_prompt_tokens_cache for f in prompts.values())},
    }
