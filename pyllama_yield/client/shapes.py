"""The engine's native results (llama-server's ``/completion`` payloads) in llama-cpp-python's
shapes: completions, their stream chunks, chats and chat chunks, logprobs, usage."""

from __future__ import annotations

import time
import uuid
from typing import Any, cast

from ..server.chat_message import chat_finish_reason
from ..server.probs import TokenProb
from ..server.results import CompletionFinal
from ..server.results import usage as server_usage
from .types import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessage,
    ChatLogprobs,
    Completion,
    CompletionChunk,
    CompletionLogprobs,
    FinishReason,
    TokenLogprob,
    ToolCall,
    Usage,
)

__all__ = ["Head", "completion_logprobs", "usage"]


class Head:
    """What every chunk of one answer shares: its id, creation time and model name."""

    def __init__(self, model: str, prefix: str = "cmpl-") -> None:
        self.completion_id = f"cmpl-{uuid.uuid4()}"
        self.id = self.completion_id if prefix == "cmpl-" else f"chat{self.completion_id}"
        self.created = int(time.time())
        self.model = model


def usage(finals: list[CompletionFinal]) -> Usage:
    """The server's rule (each prompt once, every choice's tokens) for one prompt's choices, in
    llama-cpp-python's three fields."""
    counted = server_usage(finals, n_choices=max(1, len(finals)))
    return {
        "prompt_tokens": counted["prompt_tokens"],
        "completion_tokens": counted["completion_tokens"],
        "total_tokens": counted["total_tokens"],
    }


def completion_logprobs(entries: list[TokenProb], n_top: int, offset: int) -> CompletionLogprobs:
    """``completion_probabilities`` entries as llama-cpp-python's ``logprobs``: each token's
    top-``n_top`` alternatives with the sampled token always among them; ``offset`` is where the
    first token's text starts in the answer's text."""
    out: CompletionLogprobs = {"text_offset": [], "token_logprobs": [], "tokens": [], "top_logprobs": []}
    for e in entries:
        top = {t.token: t.logprob for t in e.top[:n_top]}
        top[e.token] = e.logprob
        out["text_offset"].append(offset)
        out["token_logprobs"].append(e.logprob)
        out["tokens"].append(e.token)
        out["top_logprobs"].append(top)
        offset += len(e.token)
    return out


def _joined(a: CompletionLogprobs, b: CompletionLogprobs) -> CompletionLogprobs:
    return {
        "text_offset": a["text_offset"] + b["text_offset"],
        "token_logprobs": a["token_logprobs"] + b["token_logprobs"],
        "tokens": a["tokens"] + b["tokens"],
        "top_logprobs": a["top_logprobs"] + b["top_logprobs"],
    }


def echo_logprobs(entries: list[TokenProb], first: str | None, n_top: int) -> CompletionLogprobs:
    """The echoed prompt's logprobs (``prompt_probabilities`` rate prompt tokens 1..n-1); the
    first listed token has none, as in OpenAI's and llama-cpp-python's answers, and a leading BOS
    (``first`` None) is not listed."""
    if first is None:
        out = completion_logprobs(entries, n_top, 0)
    else:
        lead: CompletionLogprobs = {
            "text_offset": [0],
            "token_logprobs": [None],
            "tokens": [first],
            "top_logprobs": [None],
        }
        out = _joined(lead, completion_logprobs(entries, n_top, len(first)))
    if out["tokens"]:
        out["token_logprobs"][0] = out["top_logprobs"][0] = None
    return out


def completion(
    head: Head,
    finals: list[CompletionFinal],
    prompt: str,
    echo: bool,
    n_logprobs: int | None,
    first: str | None = None,
) -> Completion:
    """A non-streamed completion of ``prompt``, echoed before the text with ``echo``; the echoed
    prompt's first token's text is ``first`` (None: a BOS, not listed). Text offsets count in the
    prompt and the text, as OpenAI's do."""
    prefix = prompt if echo else ""
    choices = []
    for p in finals:
        lp = None
        if n_logprobs is not None:
            generated = p.probs or []
            if prefix:
                echoed = echo_logprobs(p.prompt_probs or [], first, n_logprobs)
                end = sum(len(t) for t in echoed["tokens"])
                lp = _joined(echoed, completion_logprobs(generated, n_logprobs, end))
            else:
                lp = completion_logprobs(generated, n_logprobs, len(prompt))
        choices.append({"text": prefix + p.content, "index": p.index, "logprobs": lp, "finish_reason": p.finish_reason})
    return {
        "id": head.id,
        "object": "text_completion",
        "created": head.created,
        "model": head.model,
        "choices": choices,  # type: ignore[typeddict-item]
        "usage": usage(finals),
    }


def completion_chunk(
    head: Head, text: str, index: int, logprobs: CompletionLogprobs | None, finish: FinishReason | None
) -> CompletionChunk:
    return {
        "id": head.id,
        "object": "text_completion",
        "created": head.created,
        "model": head.model,
        "choices": [{"text": text, "index": index, "logprobs": logprobs, "finish_reason": finish}],
    }


def chat_logprobs(entries: list[TokenProb], n_top: int) -> ChatLogprobs:
    content: list[TokenLogprob] = [
        {
            "token": e.token,
            "logprob": e.logprob,
            "bytes": list(e.piece),
            "top_logprobs": [{"token": t.token, "logprob": t.logprob, "bytes": list(t.piece)} for t in e.top[:n_top]],
        }
        for e in entries
    ]
    return {"content": content, "refusal": None}


def forced_tool_message(name: str, arguments: str, head: Head, index: int = 0) -> ChatCompletionMessage:
    """A call of the function ``tool_choice`` named, its arguments the schema-constrained output
    (for templates with no tool-call format), in llama-cpp-python's shape."""
    call: ToolCall = {
        "id": f"call__{index}_{name}_{head.completion_id}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    return {"role": "assistant", "content": None, "function_call": call["function"], "tool_calls": [call]}


def chat(
    head: Head, finals: list[CompletionFinal], messages: list[ChatCompletionMessage], n_logprobs: int | None
) -> ChatCompletion:
    choices = []
    for p, message in zip(finals, messages, strict=True):
        reason = cast(FinishReason, chat_finish_reason(p.finish_reason, bool(message.get("tool_calls"))))
        lp = chat_logprobs(p.probs or [], n_logprobs) if n_logprobs is not None else None
        choices.append({"index": p.index, "message": message, "logprobs": lp, "finish_reason": reason})
    return {
        "id": head.id,
        "object": "chat.completion",
        "created": head.created,
        "model": head.model,
        "choices": choices,  # type: ignore[typeddict-item]
        "usage": usage(finals),
    }


def chat_chunk(
    head: Head, index: int, delta: dict[str, Any], finish: FinishReason | None = None, logprobs: Any = None
) -> ChatCompletionChunk:
    return {
        "id": head.id,
        "object": "chat.completion.chunk",
        "created": head.created,
        "model": head.model,
        "choices": [{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
    }
