"""llama-cpp-python's result shapes (its ``llama_types``), as ``TypedDict``s: plain dicts at run
time, so code written against llama-cpp-python reads them unchanged."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from typing_extensions import NotRequired

__all__ = [
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatCompletionMessage",
    "Completion",
    "CompletionChunk",
    "CompletionLogprobs",
    "Embedding",
    "EmbeddingResponse",
    "ToolCall",
    "Usage",
]

FinishReason = Literal["stop", "length", "tool_calls"]


class Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class CompletionLogprobs(TypedDict):
    text_offset: list[int]
    token_logprobs: list[float | None]
    tokens: list[str]
    top_logprobs: list[dict[str, float] | None]


class CompletionChoice(TypedDict):
    text: str
    index: int
    logprobs: CompletionLogprobs | None
    finish_reason: FinishReason | None


class Completion(TypedDict):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: NotRequired[Usage]


CompletionChunk = Completion  # the same shape without ``usage``, one piece of text per chunk


class FunctionCall(TypedDict):
    name: str
    arguments: str


class ToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: FunctionCall


class ChatCompletionMessage(TypedDict):
    role: Literal["assistant"]
    content: str | None
    tool_calls: NotRequired[list[ToolCall]]
    function_call: NotRequired[FunctionCall]
    reasoning_content: NotRequired[str]


class TopLogprob(TypedDict):
    token: str
    logprob: float
    bytes: list[int] | None


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChatLogprobs(TypedDict):
    content: list[TokenLogprob] | None
    refusal: list[TokenLogprob] | None


class ChatChoice(TypedDict):
    index: int
    message: ChatCompletionMessage
    logprobs: ChatLogprobs | None
    finish_reason: FinishReason | None


class ChatCompletion(TypedDict):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage


class ChatChunkChoice(TypedDict):
    index: int
    delta: dict[str, Any]
    logprobs: ChatLogprobs | None
    finish_reason: FinishReason | None


class ChatCompletionChunk(TypedDict):
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChatChunkChoice]


class Embedding(TypedDict):
    object: Literal["embedding"]
    embedding: list[float] | list[list[float]]
    index: int


class EmbeddingUsage(TypedDict):
    prompt_tokens: int
    total_tokens: int


class EmbeddingResponse(TypedDict):
    object: Literal["list"]
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage
