"""Completion requests and the per-slot generation state of the server context.

Nothing here calls llama.cpp: the server context (``server.py``) does, on its loop thread.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field, fields
from typing import Any

MAX_N_PREDICT = 1 << 20


@dataclass
class CompletionRequest:
    """A completion's prompt and sampling parameters (llama-server's field names)."""

    prompt: str | list[int] = ""
    messages: list[dict[str, str]] | None = None  # chat: formatted with the model's template into the prompt
    n_predict: int = -1  # -1: until EOG, a stop string, or the slot's context is full
    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    seed: int = 0xFFFFFFFF
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    stop: list[str] = field(default_factory=list)
    ignore_eos: bool = False
    stream: bool = False
    cache_prompt: bool = True
    id_slot: int = -1
    add_special: bool = True  # add BOS (as the model's vocab asks) when the prompt is text
    parse_special: bool = True

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompletionRequest:
        """Build from JSON-like data; unknown fields and wrong types raise ``ValueError``."""
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"unknown field(s): {', '.join(unknown)}")
        req = cls(**data)
        req.validate()
        return req

    def validate(self) -> None:
        def check(name: str, ok: bool, what: str) -> None:
            if not ok:
                raise ValueError(f"'{name}' must be {what}, got {getattr(self, name)!r}")

        def is_int(v: object) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        def is_num(v: object) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        p = self.prompt
        check(
            "prompt",
            isinstance(p, str) or (isinstance(p, list) and all(is_int(t) for t in p)),
            "a string or a list of token ids",
        )
        check(
            "n_predict",
            is_int(self.n_predict) and -1 <= self.n_predict <= MAX_N_PREDICT,
            f"an integer in [-1, {MAX_N_PREDICT}]",
        )
        for name in ("temperature", "top_p", "min_p", "repeat_penalty", "frequency_penalty", "presence_penalty"):
            check(name, is_num(getattr(self, name)), "a number")
        check("top_k", is_int(self.top_k), "an integer")
        check("top_p", 0.0 <= self.top_p <= 1.0, "in [0, 1]")
        check("min_p", 0.0 <= self.min_p <= 1.0, "in [0, 1]")
        check("repeat_penalty", self.repeat_penalty > 0, "> 0")
        check("repeat_last_n", is_int(self.repeat_last_n) and self.repeat_last_n >= -1, "an integer >= -1")
        check("seed", is_int(self.seed) and 0 <= self.seed <= 0xFFFFFFFF, "an integer in [0, 2^32)")
        check(
            "stop",
            isinstance(self.stop, list) and all(isinstance(s, str) and s for s in self.stop),
            "a list of non-empty strings",
        )
        for name in ("ignore_eos", "stream", "cache_prompt", "add_special", "parse_special"):
            check(name, isinstance(getattr(self, name), bool), "a boolean")
        check("id_slot", is_int(self.id_slot), "an integer")


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
class Slot:
    """One sequence of the shared context. Only the loop thread mutates it."""

    id: int
    state: SlotState = SlotState.IDLE
    id_task: int = -1
    request: CompletionRequest | None = None
    sampler: Any = None  # llama.Sampler while busy
    cache_tokens: list[int] = field(default_factory=list)  # what the KV cache holds for this seq
    prompt_tokens: list[int] = field(default_factory=list)
    n_prompt_done: int = 0  # prompt tokens in the KV cache (cached prefix + processed)
    n_prompt_cached: int = 0  # of which reused from the previous request
    generated: list[int] = field(default_factory=list)
    last_token: int = -1  # sampled, not yet in the KV cache
    text: Any = None  # TextStream while busy
    i_batch: int = -1  # index in the current batch of the token whose logits we sample
    drafts: list[int] = field(default_factory=list)  # drafted for the coming step
    draft_kv_short: bool = False  # all drafts of the last step accepted: the draft KV lacks the last one
    t_start: float = 0.0
    t_prompt_done: float = 0.0
    n_draft_total: int = 0
    n_draft_accepted: int = 0

    @property
    def busy(self) -> bool:
        return self.state is not SlotState.IDLE

    def reset(self) -> None:
        self.state = SlotState.IDLE
        self.id_task = -1
        self.request = None
        if self.sampler is not None:
            self.sampler.close()
        self.sampler = None
        self.prompt_tokens = []
        self.generated = []
        self.last_token = -1
        self.text = None
        self.i_batch = -1
        self.drafts = []


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
        self._bytes = b""
        self.text = ""  # all complete text so far
        self.sent = 0  # characters of ``text`` already streamed
        self.stopping_word = ""

    def push(self, piece: bytes) -> None:
        self._bytes += piece
        try:
            self.text = self._bytes.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.reason == "unexpected end of data":
                self.text = self._bytes[: exc.start].decode("utf-8", "replace")
            else:
                self.text = self._bytes.decode("utf-8", "replace")

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
