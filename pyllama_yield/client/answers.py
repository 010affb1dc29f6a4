"""How one call's results become what the caller gets: a whole answer from the final results, or
stream chunks one result at a time. The same objects serve the sync and the async calls."""

from __future__ import annotations

from typing import Any, cast

from ..queue import Result
from ..server.chat_message import ChatChoices, ChatState, chat_finish_reason
from ..server.errors import EngineError, raise_for_error
from ..server.results import CompletionFinal, completion_step
from . import shapes
from .types import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessage,
    Completion,
    CompletionChunk,
    FinishReason,
)

__all__ = ["ChatAnswer", "CompletionAnswer", "EngineError", "raise_for_error"]  # the last two: server.errors


class CompletionAnswer:
    """``prompt``: its text (echoed with ``echo``, and where text offsets start); ``n_logprobs``:
    top alternatives per token (None: off)."""

    def __init__(
        self, head: shapes.Head, prompt: str, echo: bool, n_logprobs: int | None, first: str | None = None
    ) -> None:
        self.head = head
        self.prompt = prompt
        self.echo = echo
        self.n_logprobs = n_logprobs
        self.first = first  # the echoed prompt's first token (None: a BOS)
        self._offsets: dict[int, int] = {}  # per choice: where the next streamed text starts

    def final(self, finals: list[CompletionFinal]) -> Completion:
        return shapes.completion(self.head, finals, self.prompt, self.echo, self.n_logprobs, self.first)

    def chunks(self, res: Result) -> list[CompletionChunk]:
        p = completion_step(res)
        i = p.index
        offset = self._offsets.get(i, len(self.prompt))
        entries = p.probs if self.n_logprobs is not None else None
        lp = shapes.completion_logprobs(entries, self.n_logprobs or 0, offset) if entries else None
        out = []
        if p.content or lp is not None:
            out.append(shapes.completion_chunk(self.head, p.content, i, lp, None))
        self._offsets[i] = offset + len(p.content)
        if isinstance(p, CompletionFinal):
            out.append(shapes.completion_chunk(self.head, "", i, None, p.finish_reason))
        return out


class ChatAnswer:
    """The answer read back with the template's output parser (content, reasoning, tool calls);
    ``forced``: the function ``tool_choice`` named when the template has no tool-call format, so
    the whole output is its arguments."""

    def __init__(
        self, head: shapes.Head, parse: dict[str, Any], n_logprobs: int | None, forced: str | None = None
    ) -> None:
        self.head = head
        self.parse = parse
        self.n_logprobs = n_logprobs
        self.forced = forced
        self._choices = ChatChoices(parse)

    def _message(self, p: CompletionFinal) -> ChatCompletionMessage:
        if self.forced is not None:
            return shapes.forced_tool_message(self.forced, p.content, self.head, p.index)
        state = ChatState(self.parse)
        state.update(p.content, is_partial=False)
        return state.message.openai()  # type: ignore[return-value]

    def final(self, finals: list[CompletionFinal]) -> ChatCompletion:
        return shapes.chat(self.head, finals, [self._message(p) for p in finals], self.n_logprobs)

    def chunks(self, res: Result) -> list[ChatCompletionChunk]:
        p = completion_step(res)
        i = p.index
        out = []
        if i not in self._choices:
            out.append(shapes.chat_chunk(self.head, i, {"role": "assistant"}))
        state = self._choices[i]
        if self.forced is not None:
            deltas = [self._forced_delta(i, p.content)] if p.content else []
        else:
            deltas = [d.openai() for d in state.update(p.content, is_partial=not p.stop)]
        entries = p.probs if self.n_logprobs is not None else None
        lp = shapes.chat_logprobs(entries, self.n_logprobs or 0) if entries else None
        out += [shapes.chat_chunk(self.head, i, d, logprobs=lp) for d in deltas]
        if isinstance(p, CompletionFinal):
            called = self.forced is not None or state.called_tools
            reason = cast(FinishReason, chat_finish_reason(p.finish_reason, called))
            out.append(shapes.chat_chunk(self.head, i, {}, reason))
        return out

    def _forced_delta(self, index: int, piece: str) -> dict[str, Any]:
        assert self.forced is not None
        call = shapes.forced_tool_message(self.forced, piece, self.head, index)["tool_calls"][0]
        return {"role": None, "content": None, "tool_calls": [{"index": 0, **call}]}
