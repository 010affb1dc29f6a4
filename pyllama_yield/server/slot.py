"""The per-slot generation state of the server context, and the text stream of a slot.

Nothing here calls llama.cpp: the server context (``context.py``) does, on its loop thread.
"""

from __future__ import annotations

import codecs
import enum
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .embedding import EmbeddingTask
from .probs import TokenProb
from .task import CompletionTask

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
class Slot:
    """One sequence of the shared context. Only the loop thread mutates it."""

    id: int
    state: SlotState = SlotState.IDLE
    id_task: int = -1
    task: CompletionTask | EmbeddingTask | None = None
    sampler: CommonSampler | None = None  # while busy
    spent_sampler: CommonSampler | None = None  # the last task's, freed when the next task starts here
    cache_tokens: list[int] = field(default_factory=list)  # what the KV cache holds for this seq
    prompt_tokens: list[int] = field(default_factory=list)
    n_prompt_done: int = 0  # prompt tokens in the KV cache (cached prefix + processed)
    n_prompt_cached: int = 0  # of which reused from the previous request
    generated: list[int] = field(default_factory=list)
    last_token: int = -1  # sampled, not yet in the KV cache
    text: TextStream | None = None  # while busy
    i_batch: int = -1  # index in the current batch of the token whose logits we sample
    drafts: list[int] = field(default_factory=list)  # drafted for the coming step
    draft_kv_short: bool = False  # all drafts of the last step accepted: the draft KV lacks the last one
    # llama-server's slot stats: start, after the last prompt batch, after the last sampled token
    t_start: float = 0.0
    t_prompt_last: float = 0.0
    t_gen_last: float = 0.0
    n_prompt_processed: int = 0  # prompt tokens decoded for this task (not the cached ones)
    n_draft_total: int = 0
    n_draft_accepted: int = 0
    probs: list[TokenProb] = field(default_factory=list)  # completion_probabilities, one per token
    prompt_probs: list[TokenProb] = field(default_factory=list)  # prompt_logprobs: prompt tokens 1..n-1
    i_batch_first: int = -1  # where this step's prompt chunk starts in the batch
    truncated: bool = False  # stopped because the slot's context filled up
    synth_rng: random.Random | None = None  # for --spec-synth-rates
    lora: tuple[float, ...] = ()  # the LoRA scales its task decodes with (what its cache holds)
    t_last_used: float = -1.0  # when it last finished a task (least recently used goes first)
    checkpoints: list[Checkpoint] = field(default_factory=list)  # of its memory, oldest first

    def forget_cache(self) -> None:
        """What the slot's memory held is gone (its cells removed, or the context freed): its
        tokens and the checkpoints of that memory go together."""
        self.cache_tokens, self.checkpoints = [], []

    def add_token(self, tok: int, is_eog: bool, piece: bytes, n_ctx: int, context_shift: bool = False) -> StopType:
        """Record a generated token and tell whether generation stops here, and why (the checks
        of llama-server's ``process_token``: end of generation, a stop string, ``n_predict``, the
        slot's context, ``t_max_predict_ms`` at a new line)."""
        assert self.text is not None
        p = self.completion.params
        self.generated.append(tok)
        self.last_token = tok
        if is_eog:
            return StopType.EOS
        self.text.push(piece)
        if self.text.find_stop() >= 0:
            return StopType.WORD
        if p.n_predict >= 0 and len(self.generated) >= p.n_predict:
            return StopType.LIMIT
        if len(self.cache_tokens) + 1 >= n_ctx and not context_shift:
            self.truncated = True  # the slot's context is full
            return StopType.LIMIT
        if p.t_max_predict_ms > 0 and "\n" in self.text.text[self.text.sent :]:
            if (now() - self.t_prompt_last) * 1e3 > p.t_max_predict_ms:
                return StopType.LIMIT  # a time limit, checked at a new line (for code completion)
        return StopType.NONE

    @property
    def completion(self) -> CompletionTask:
        """The completion task of a slot that generates."""
        assert isinstance(self.task, CompletionTask), "the slot runs no completion"
        return self.task

    @property
    def completion_text(self) -> TextStream:
        """The text of the completion the slot generates."""
        assert self.text is not None, "the slot runs no completion"
        return self.text

    @property
    def busy(self) -> bool:
        return self.state is not SlotState.IDLE

    def prompt_seconds(self) -> float:
        return self.t_prompt_last - self.t_start if self.t_prompt_last else 0.0

    def gen_seconds(self) -> float:
        """From the last prompt batch to the last token (at least 1 us once a token came)."""
        return max(1e-6, self.t_gen_last - self.t_prompt_last) if self.t_gen_last else 0.0

    def start_timing(self) -> None:
        self.t_start = now()
        self.t_prompt_last = self.t_gen_last = 0.0
        self.n_prompt_processed = 0

    def take_sampler(self, sampler: CommonSampler) -> None:
        """The sampler of the slot's new task. The previous task's is freed only now, just before
        the new one samples, as llama-server frees it at the slot's next launch: the new sampler's
        first sample then gets the candidate buffer just freed (one entry per vocabulary token:
        3 MB for Gemma 3's 262k) instead of faulting in fresh pages, which cost 1.5 ms per slot
        on the first token of every request (freed at the end of a request, glibc returns that
        memory to the system before the next request comes)."""
        self.close_samplers()
        self.sampler = sampler

    def close_samplers(self) -> None:
        for sampler in (self.sampler, self.spent_sampler):
            if sampler is not None:
                sampler.close()
        self.sampler = self.spent_sampler = None

    def reset(self) -> None:
        if self.busy:
            self.t_last_used = now()
        self.state = SlotState.IDLE
        self.id_task = -1
        self.task = None
        if self.sampler is not None:  # kept until the slot's next task: see take_sampler
            if self.spent_sampler is not None:
                self.spent_sampler.close()
            self.spent_sampler = self.sampler
        self.sampler = None
        self.prompt_tokens = []
        self.generated = []
        self.last_token = -1
        self.text = None
        self.i_batch = -1
        self.drafts = []
        self.probs = []
        self.prompt_probs = []
        self.truncated = False


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class TextStream:
    """Bytes of token pieces in, text out: holds back incomplete UTF-8 and possible stop-string prefixes."""

    def __init__(self, stop: list[str]) -> None:
        self.stop = stop
        # an incomplete UTF-8 sequence at the end waits in the decoder for its next bytes;
        # invalid bytes become U+FFFD (each token's bytes decoded once, not the whole text again)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.text = ""  # all complete text so far
        self.sent = 0  # characters of ``text`` already streamed
        self.stopping_word = ""

    def push(self, piece: bytes) -> None:
        self.text += self._decoder.decode(piece)

    def find_stop(self) -> int:
        """Index where a stop string starts in the unsent text, or -1."""
        if not self.stop:
            return -1
        lookback = max(len(s) for s in self.stop)
        start = max(0, self.sent - lookback)
        hits = [(i, s) for s in self.stop if (i := self.text.find(s, start)) >= 0]
        if not hits:
            return -1
        i, word = min(hits)
        self.stopping_word = word
        self.text = self.text[:i]
        return i

    def take_sendable(self, final: bool) -> str:
        """Text that can be streamed now (everything when ``final``)."""
        end = len(self.text)
        if not final:
            for s in self.stop:  # hold back a suffix that may grow into a stop string
                for k in range(min(len(s) - 1, end - self.sent), 0, -1):
                    if self.text.endswith(s[:k]):
                        end = min(end, len(self.text) - k)
                        break
        out = self.text[self.sent : end]
        self.sent = max(self.sent, end)
        return out


def now() -> float:
    return time.perf_counter()
