"""The request body of every POST route, as pydantic models: ``/openapi.json`` is generated from
them (``openapi.py``) and the fuzz tests generate bodies from that document.

The small routes validate through their model here (``parse``); the completion routes validate
through ``server.params.CompletionParams`` and the chat messages through
``server.chat_request.ChatRequest`` (the chat routes' model), which these models reuse, so the
description and the checks cannot drift apart. Fields are named as llama-server (and OpenAI /
Anthropic, on their routes) name them.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, RootModel, StrictBool, StrictInt, ValidationError

from ..server.chat_request import ChatMessage, ChatRequest
from ..server.params import CompletionParams, LoraScale, validation_message
from .errors import ApiError
from .ollama_embed import EmbeddingsRequest as OllamaEmbeddingsRequest
from .ollama_embed import EmbedRequest as OllamaEmbedRequest
from .ollama_request import OllamaChatRequest, OllamaGenerateRequest

__all__ = ["REQUEST_MODELS", "parse"]

M = TypeVar("M", bound=BaseModel)

# a prompt: text, token ids, or a mix; a list of those is one completion per entry
TokenOrText = StrictInt | str


class MediaPrompt(BaseModel):
    """Text with media: one marker (``/props`` ``media_marker``) per base64 file (needs --mmproj)."""

    prompt_string: str
    multimodal_data: list[str] = Field(default_factory=list)


class ContentPrompt(BaseModel):
    """An embeddings input as OpenAI-style content parts (``text``, ``image_url``)."""

    content: list[dict[str, Any]]


Prompt = str | MediaPrompt | list[TokenOrText | list[TokenOrText] | MediaPrompt]
EmbeddingInput = str | MediaPrompt | ContentPrompt | list[TokenOrText | list[TokenOrText] | MediaPrompt | ContentPrompt]


def parse(model: type[M], body: dict[str, Any]) -> M:
    """``body`` validated by ``model``; a 400 that names the field and the problem otherwise."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise ApiError(validation_message(exc)) from None


# the bodies whose other fields go on to the engine (llama-server's fields on every route)
OPEN = ConfigDict(extra="allow")


class TokenizeRequest(BaseModel):
    content: str
    add_special: StrictBool = False
    parse_special: StrictBool = True
    with_pieces: StrictBool = False


class DetokenizeRequest(BaseModel):
    tokens: list[StrictInt] = Field(default_factory=list)


class CompletionRequest(CompletionParams):
    """``/completion``: llama-server's native fields and the prompt."""

    prompt: Prompt


class InfillExtra(BaseModel):
    filename: str = ""
    text: str = ""


class InfillRequest(CompletionParams):
    input_prefix: str = ""
    input_suffix: str = ""
    input_extra: list[InfillExtra] = Field(default_factory=list)
    prompt: str = ""


class EmbeddingRequest(BaseModel):
    """``input`` (OpenAI) or ``content`` (llama-server's own shape)."""

    model_config = OPEN

    input: EmbeddingInput | None = None
    content: EmbeddingInput | None = None
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    embd_normalize: StrictInt = 2


class RerankRequest(BaseModel):
    """Jina's shape (``documents``) or TEI's (``texts``)."""

    model_config = OPEN

    query: str
    documents: list[str] | None = Field(None, min_length=1)
    texts: list[str] | None = Field(None, min_length=1)
    top_n: StrictInt | None = None
    return_text: StrictBool = False


class ApplyTemplateRequest(BaseModel):
    model_config = OPEN

    messages: list[ChatMessage]
    tools: list[dict[str, Any]] | None = None
    chat_template_kwargs: dict[str, Any] | None = None


class OpenAICompletionRequest(BaseModel):
    """OpenAI's legacy completions; llama-server's native completion fields are accepted as well."""

    model_config = OPEN

    model: str | None = None
    prompt: Prompt
    stream: StrictBool = False
    max_tokens: StrictInt | None = None
    temperature: float | None = None
    top_p: float | None = None
    n: StrictInt | None = None
    stop: str | list[str] | None = None
    seed: StrictInt | None = None
    logprobs: StrictInt | None = None
    echo: Literal[False] = False


class ResponsesRequest(BaseModel):
    """OpenAI's Responses API (stateless: no ``previous_response_id``)."""

    model_config = OPEN

    model: str | None = None
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    stream: StrictBool = False
    max_output_tokens: StrictInt | None = None
    temperature: float | None = None
    top_p: float | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    reasoning: dict[str, Any] | None = None
    text: dict[str, Any] | None = None


class AnthropicMessagesRequest(BaseModel):
    """Anthropic's Messages API."""

    model_config = OPEN

    model: str | None = None
    messages: list[dict[str, Any]]
    max_tokens: StrictInt = 4096
    system: str | list[dict[str, Any]] | None = None
    stream: StrictBool = False
    stop_sequences: list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: StrictInt | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None


class SlotFileRequest(BaseModel):
    """``POST /slots/{id}?action=save|restore`` (``erase`` reads no body)."""

    filename: str = Field(min_length=1, max_length=255)


class LoraAdaptersRequest(RootModel[list[LoraScale]]):
    """The scales of requests that name no adapters; adapters not listed get 0."""


class PropsRequest(BaseModel):
    """``POST /props`` (with ``--props``): accepted and ignored, as llama-server does."""

    model_config = OPEN


class ToolCallRequest(BaseModel):
    """``POST /tools``: one server-side tool call (``--tools`` / MCP servers)."""

    tool: str
    params: dict[str, Any] = Field(default_factory=dict)
    stream: bool = False


class StreamLookupRequest(BaseModel):
    """``POST /v1/streams/lookup``: which of these conversations have a resumable stream."""

    conversation_ids: list[str] = Field(default_factory=list)


class BatchCreateRequest(BaseModel):
    """``POST /v1/batches``: OpenAI's batch of the requests in an uploaded file."""

    model_config = ConfigDict(extra="ignore")

    input_file_id: str
    endpoint: str
    completion_window: str = "24h"
    metadata: dict[str, str] | None = Field(None, max_length=16)


class OllamaShowRequest(BaseModel):
    model: str


# (path, method) -> the model of its JSON body

REQUEST_MODELS: dict[tuple[str, str], type[BaseModel]] = {
    ("/api/chat", "POST"): OllamaChatRequest,
    ("/api/generate", "POST"): OllamaGenerateRequest,
    ("/api/show", "POST"): OllamaShowRequest,
    ("/api/pull", "POST"): OllamaShowRequest,
    ("/api/embed", "POST"): OllamaEmbedRequest,
    ("/api/embeddings", "POST"): OllamaEmbeddingsRequest,
    ("/tools", "POST"): ToolCallRequest,
    ("/v1/streams/lookup", "POST"): StreamLookupRequest,
    ("/props", "POST"): PropsRequest,
    ("/apply-template", "POST"): ApplyTemplateRequest,
    ("/slots/{id_slot}", "POST"): SlotFileRequest,
    ("/lora-adapters", "POST"): LoraAdaptersRequest,
    ("/tokenize", "POST"): TokenizeRequest,
    ("/detokenize", "POST"): DetokenizeRequest,
    ("/completion", "POST"): CompletionRequest,
    ("/completions", "POST"): CompletionRequest,
    ("/infill", "POST"): InfillRequest,
    ("/embedding", "POST"): EmbeddingRequest,
    ("/embeddings", "POST"): EmbeddingRequest,
    ("/v1/embeddings", "POST"): EmbeddingRequest,
    ("/rerank", "POST"): RerankRequest,
    ("/reranking", "POST"): RerankRequest,
    ("/v1/rerank", "POST"): RerankRequest,
    ("/v1/reranking", "POST"): RerankRequest,
    ("/v1/completions", "POST"): OpenAICompletionRequest,
    ("/v1/chat/completions", "POST"): ChatRequest,
    ("/chat/completions", "POST"): ChatRequest,
    ("/v1/chat/completions/input_tokens", "POST"): ChatRequest,
    ("/chat/completions/input_tokens", "POST"): ChatRequest,
    ("/v1/responses", "POST"): ResponsesRequest,
    ("/responses", "POST"): ResponsesRequest,
    ("/v1/responses/input_tokens", "POST"): ResponsesRequest,
    ("/responses/input_tokens", "POST"): ResponsesRequest,
    ("/v1/messages", "POST"): AnthropicMessagesRequest,
    ("/v1/messages/count_tokens", "POST"): AnthropicMessagesRequest,
    ("/v1/batches", "POST"): BatchCreateRequest,
}
