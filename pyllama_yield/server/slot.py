"""A slot of the server context: one sequence of the shared KV cache and the task it runs.

Its state comes in parts, each written by the code that owns that concern:

- ``SlotMemory``: what the sequence's KV cells hold (tokens, checkpoints, LoRA scales); kept
  across tasks and changed by the step, a task's start, context shift, the prompt cache, slot
  files and checkpoints.
- ``SlotPrompt``: the task's prompt and how far it is in the cache (the step advances it).
- ``Generation``: what the task generated (tokens, text, probabilities; the outputs add to it).
- ``Drafting``: drafts for the coming step and their tally (the drafter makes them, the outputs
  settle them).

Nothing here calls llama.cpp: the server context (``context.py``) does, on its loop thread.
"""

from __future__ import annotations

import enum
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..queue import Task
from .embedding import EmbeddingTask
from .probs import TokenProb
from .task import CompletionTask
from .text_stream import TextStream

if TYPE_CHECKING:
    from ..common import CommonSampler


class SlotState(enum.Enum):
    IDLE = "idle"
    PROCESSING_PROMPT = "processing_prompt"
    GENERATING = "generating"


class StopType(enum.Enum):
    NONE = "none"
    EOS = "eos"  # end-of-generation token
    LIMIT = "limit"  # n_predict reached or the slot's context is full
    WORD = "word"  # a stop string


@dataclass
class Checkpoint:
    """A slot's memory as it was at some point of a prompt (see checkpoints.py, which makes and
    uses them), for models whose memory cannot be cut back to any position."""

    pos_min: int  # the positions the memory held when it was taken
    pos_max: int
    n_tokens: int  # cached tokens it stands for
    data: bytearray  # the partial sequence state
    id_task: int  # the task that made it


@dataclass
class SlotMemory:
    """What the slot's sequence of the KV cache holds, outliving the tasks that fill it."""

    tokens: list[int] = field(default_factory=list)  # one per cell (media cells too): the next position is len()
    checkpoints: list[Checkpoint] = field(default_factory=list)  # of this memory, oldest first
    lora: tuple[float, ...] = ()  # the LoRA scales it was computed with
    t_last_used: float = -1.0  # when its last task ended (the least recently used is reused first)

    def forget(self) -> None:
        """The cells are gone (removed, or the context freed): their tokens and checkpoints too."""
        self.tokens, self.checkpoints = [], []

    def replace(self, tokens: list[int], checkpoints: list[Checkpoint] | None = None) -> None:
        """The cells now hold ``tokens`` (a kept prefix, or a restored state)."""
        self.tokens, self.checkpoints = tokens, checkpoints or []

    def extend(self, tokens: Sequence[int]) -> None:
        self.tokens.extend(tokens)

    def append(self, token: int) -> None:
        self.tokens.append(token)

    def discard(self, n_keep: int, n_discard: int) -> None:
        """Context shift dropped ``n_discard`` cells after the first ``n_keep``; the checkpoints'
        positions no longer match."""
        del self.tokens[n_keep : n_keep + n_discard]
        self.checkpoints = []


@dataclass
class SlotPrompt:
    """A task's prompt and how much of it the cache holds."""

    tokens: list[int] = field(default_factory=list)
    n_done: int = 0  # prompt tokens in the KV cache (cached prefix + processed)
    n_cached: int = 0  # of which reused from what the slot held
    n_processed: int = 0  # decoded for this task
    probs: list[TokenProb] = field(default_factory=list)  # prompt_logprobs: tokens 1..n-1
    t_last: float = 0.0  # after its last batch was decoded

    @classmethod
    def keeping(cls, tokens: list[int], n_cached: int) -> SlotPrompt:
        return cls(tokens, n_done=n_cached, n_cached=n_cached)

    @property
    def done(self) -> bool:
        return self.n_done >= len(self.tokens)

    def advance(self, n: int) -> list[int]:
        """The next ``n`` tokens went into the cache: returns them."""
        chunk = self.tokens[self.n_done : self.n_done + n]
        self.n_done += n
        self.n_processed += n
        self.t_last = now()
        return chunk


@dataclass
class Generation:
    """What a completion task generated so far."""

    text: TextStream = field(default_factory=lambda: TextStream([]))
    tokens: list[int] = field(default_factory=list)
    last_token: int = -1  # sampled, not yet in the KV cache
    probs: list[TokenProb] = field(default_factory=list)  # completion_probabilities, one per token
    truncated: bool = False  # stopped or shifted because the slot's context filled up
    t_last: float = 0.0  # when its last token came


@dataclass
class Drafting:
    """Speculative decoding's state of one slot."""

    pending: list[int] = field(default_factory=list)  # drafted for the coming step
    kv_short: bool = False  # every draft of the last step accepted: the draft KV lacks the last one
    n_total: int = 0  # drafted for this task
    n_accepted: int = 0
    synth_rng: random.Random | None = None  # for --spec-synth-rates

    def take(self) -> list[int]:
        drafts, self.pending = self.pending, []
        return drafts

    def settle(self, n_drafted: int, n_accepted: int) -> None:
        self.kv_short = n_drafted > 0 and n_accepted == n_drafted
        self.n_total += n_drafted
        self.n_accepted += n_accepted


@dataclass
class Suspended:
    """A completion taken off its slot for more urgent work, with what it needs to go on where it
    stopped (its KV cells are kept apart by the caller: preemption.py)."""

    id_task: int
    task: CompletionTask
    tenant: str
    priority: int
    state: SlotState
    sampler: CommonSampler
    memory: SlotMemory
    prompt: SlotPrompt
    generated: Generation
    draft: Drafting
    t_start: float


@dataclass
class Slot:
    """One sequence of the shared context. Only the loop thread mutates it."""

    id: int
    state: SlotState = SlotState.IDLE
    id_task: int = -1
    task: CompletionTask | EmbeddingTask | None = None
    tenant: str = ""  # whose task it runs
    priority: int = 0  # its task's (lower is sooner): a more urgent one waiting may preempt it
    sampler: CommonSampler | None = None  # while busy
    spent_sampler: CommonSampler | None = None  # the last task's, freed when the next task starts here
    memory: SlotMemory = field(default_factory=SlotMemory)
    prompt: SlotPrompt = field(default_factory=SlotPrompt)
    generated: Generation = field(default_factory=Generation)
    draft: Drafting = field(default_factory=Drafting)
    # where this step's batch holds the slot's tokens: the output it samples, its prompt chunk
    i_batch: int = -1
    i_batch_first: int = -1
    t_start: float = 0.0  # when the task started here

    def start(self, queued: Task, prompt: SlotPrompt, generated: Generation) -> None:
        """The slot takes a task whose prompt comes next (the memory is already cut to what it keeps)."""
        assert isinstance(queued.payload, (CompletionTask, EmbeddingTask))
        self.id_task, self.task = queued.id, queued.payload
        self.tenant, self.priority = queued.tenant, queued.priority
        self.prompt, self.generated = prompt, generated
        self.t_start = now()
        self.state = SlotState.PROCESSING_PROMPT

    def suspend(self) -> Suspended:
        """Take the running completion off the slot, all of its state but its KV cells (the
        caller saves those); the slot is free and forgets what its cells held."""
        assert isinstance(self.task, CompletionTask) and self.sampler is not None
        held = Suspended(
            self.id_task, self.task, self.tenant, self.priority, self.state, self.sampler,
            self.memory, self.prompt, self.generated, self.draft, self.t_start,
        )  # fmt: skip
        self.sampler = None  # the task's still: not the slot's to free
        self.memory, self.draft = SlotMemory(), Drafting()
        self.reset()
        return held

    def resume(self, held: Suspended) -> None:
        """Go on with a suspended completion whose KV cells were put back in this slot's sequence."""
        self.take_sampler(held.sampler)
        self.id_task, self.task, self.tenant, self.priority = held.id_task, held.task, held.tenant, held.priority
        self.memory, self.prompt, self.generated, self.draft = held.memory, held.prompt, held.generated, held.draft
        self.t_start, self.state = held.t_start, held.state

    def begin_generation(self) -> None:
        self.state = SlotState.GENERATING

    def add_token(self, tok: int, is_eog: bool, piece: bytes, n_ctx: int, context_shift: bool = False) -> StopType:
        """Record a generated token and tell whether generation stops here, and why (the checks
        of llama-server's ``process_token``: end of generation, a stop string, ``n_predict``, the
        slot's context, ``t_max_predict_ms`` at a new line)."""
        p = self.completion.params
        generated = self.generated
        generated.tokens.append(tok)
        generated.last_token = tok
        if is_eog:
            return StopType.EOS
        text = generated.text
        text.push(piece)
        if text.find_stop() >= 0:
            return StopType.WORD
        if p.n_predict >= 0 and len(generated.tokens) >= p.n_predict:
            return StopType.LIMIT
        if len(self.memory.tokens) + 1 >= n_ctx and not context_shift:
            generated.truncated = True  # the slot's context is full
            return StopType.LIMIT
        if p.t_max_predict_ms > 0 and "\n" in text.text[text.sent :]:
            if (now() - self.prompt.t_last) * 1e3 > p.t_max_predict_ms:
                return StopType.LIMIT  # a time limit, checked at a new line (for code completion)
        return StopType.NONE

    @property
    def completion(self) -> CompletionTask:
        """The completion task of a slot that generates."""
        assert isinstance(self.task, CompletionTask), "the slot runs no completion"
        return self.task

    @property
    def busy(self) -> bool:
        return self.state is not SlotState.IDLE

    def prompt_seconds(self) -> float:
        return self.prompt.t_last - self.t_start if self.prompt.t_last else 0.0

    def gen_seconds(self) -> float:
        """From the last prompt batch to the last token (at least 1 us once a token came)."""
        return max(1e-6, self.generated.t_last - self.prompt.t_last) if self.generated.t_last else 0.0

    def take_sampler(self, sampler: CommonSampler) -> None:
        """The sampler of the slot's new task. The previous task's is freed only now, just before
        the new one samples, as llama-server frees it at the slot's next launch: the new sampler's
        first sample then gets the candidate buffer just freed (one entry per vocabulary token:
        3 MB for Gemma 3's 262k) instead of faulting in fresh pages, which cost 1.5 ms per slot
        on the first token of every request (freed at the end of a request, glibc returns that
        memory to the system before the next request comes)."""
        self.close_samplers()
        self.sampler = sampler

    def reuse_sampler(self, params: dict[str, Any]) -> CommonSampler | None:
        """The last task's sampler, reset, when it was made from the same sampling ``params``:
        a client that keeps its settings gets its chain back for a few clears instead of a new
        one (about 40-100 us here, on the way to its first token); else None."""
        spent = self.spent_sampler
        if spent is None or spent.params != params or not spent.reset():
            return None
        self.spent_sampler = None
        return spent

    def close_samplers(self) -> None:
        for sampler in (self.sampler, self.spent_sampler):
            if sampler is not None:
                sampler.close()
        self.sampler = self.spent_sampler = None

    def reset(self) -> None:
        """The task ended: the slot is free, its memory kept for the next."""
        if self.busy:
            self.memory.t_last_used = now()
        self.state = SlotState.IDLE
        self.id_task = -1
        self.task = None
        self.tenant, self.priority = "", 0
        if self.sampler is not None:  # kept until the slot's next task: see take_sampler
            if self.spent_sampler is not None:
                self.spent_sampler.close()
            self.spent_sampler = self.sampler
        self.sampler = None
        self.prompt, self.generated = SlotPrompt(), Generation()
        self.draft.pending = []
        self.i_batch = -1


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many tokens ``a`` and ``b`` share at their start. Slices are compared in C, in windows
    that double until one differs, then halved toward the difference: a chat's 4k-token history
    costs tens of microseconds instead of hundreds in a Python loop, an early difference little."""
    n = min(len(a), len(b))
    lo, step = 0, 16
    while True:  # a[:lo] == b[:lo]
        hi = min(n, lo + step)
        if a[lo:hi] != b[lo:hi]:
            break
        if hi == n:
            return n
        lo, step = hi, step * 2
    while hi - lo > 16:  # the first difference is in a[lo:hi]
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    while a[lo] == b[lo]:
        lo += 1
    return lo


def now() -> float:
    return time.perf_counter()
