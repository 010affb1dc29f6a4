"""``/v1/chat/completions``: the chat rendered by the model's template, the answer read back into
``content``, ``reasoning_content`` and ``tool_calls`` (streamed as OpenAI deltas)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..queue import Result
from ..server import CompletionTask
from ..server.chat_message import ChatChoices
from ..server.chat_request import ChatPlan
from ..server.results import CompletionFinal, completion_step, usage
from .app_state import AppState, json_body
from .bridge import named_event_sse
from .json_out import JSONResponse
from .openai import answer, answer_head, logprobs, whole_answer


class ChatCompletionsAnswer:
    """One ``/v1/chat/completions`` answer: each choice's text read back by the template's output
    parser (``ChatChoices``), rendered as OpenAI's message or deltas."""

    coalesce = True  # each render parses the whole text so far: tokens that came together go as one

    def __init__(
        self, state: AppState, include_usage: bool, verbose: bool, parse: dict[str, Any], n_choices: int = 1
    ) -> None:
        self.include_usage, self.verbose, self.n_choices = include_usage, verbose, n_choices
        self.head = answer_head(state, "chatcmpl-")
        self.choices = ChatChoices(parse)

    def whole(self, finals: list[CompletionFinal]) -> dict[str, Any]:
        choices = [self._choice(p) for p in finals]
        return whole_answer(self.head, "chat.completion", finals, choices, self.n_choices, self.verbose)

    def _choice(self, p: CompletionFinal) -> dict[str, Any]:
        st = self.choices[p.index]
        st.update(p.content, is_partial=False)
        out = {"finish_reason": st.finish_reason(p.finish_reason), "index": p.index, "message": st.message.openai()}
        if lp := logprobs(p):
            out["logprobs"] = lp
        return out

    def _chunk(self, index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "choices": [{"finish_reason": finish, "index": index, "delta": delta}],
            **self.head,
            "object": "chat.completion.chunk",
        }

    def chunks(self, r: Result) -> list[Any]:
        p = completion_step(r)
        final = isinstance(p, CompletionFinal)
        first = p.index not in self.choices
        st = self.choices[p.index]
        out = [self._chunk(p.index, {"role": "assistant", "content": None})] if first else []
        out += [self._chunk(p.index, d.openai()) for d in st.update(p.content, is_partial=not final)]
        if out and not final and (lp := logprobs(p)):
            out[-1]["choices"][0]["logprobs"] = lp
        if isinstance(p, CompletionFinal):
            out.append(self._chunk(p.index, {}, st.finish_reason(p.finish_reason)))
            if self.include_usage:
                out.append({"choices": [], **self.head, "object": "chat.completion.chunk", "usage": usage([p])})
        if out and p.timings is not None:
            out[-1]["timings"] = p.timings.json()
        return out


async def chat_tasks(request: Request, state: AppState, body: dict[str, Any]) -> tuple[ChatPlan, list[CompletionTask]]:
    """An OpenAI chat body through the engine's one chat path (``server/chat_request.py``):
    validated, its media read, its prompt rendered and tokenized, in one bridge call (none for a
    small body: ``Bridge.builds_inline``)."""
    chats, media_path = state.engine.chats, state.settings.media_path

    def build() -> tuple[ChatPlan, list[CompletionTask]]:
        plan = chats.plan(body, media_path=media_path)
        return plan, chats.tasks(plan)

    return await state.bridge.build(build, request=request)


async def chat_completions(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    plan, tasks = await chat_tasks(request, state, await json_body(request))
    p = tasks[0].params
    shape = ChatCompletionsAnswer(state, p.include_usage, p.verbose, plan.parse, n_choices=p.n_cmpl)
    return await answer(request, state, tasks, shape)


async def count_chat_tokens(state: AppState, body: dict[str, Any]) -> int:
    """How many tokens an OpenAI chat body takes once rendered by the template."""
    return await state.bridge.build(lambda: state.engine.chats.count_tokens(body, state.settings.media_path))


async def answer_with_events(
    request: Request,
    state: AppState,
    tasks: list[Any],
    events: Callable[[Result], list[Any]],
    whole: Callable[[CompletionFinal], dict[str, Any]],
) -> Response:
    """One answer as named SSE events when streamed (Anthropic, OpenAI Responses), else whole."""
    if tasks[0].params.stream:
        return await state.bridge.stream(request, tasks, events, done=None, frame=named_event_sse, coalesce=True)
    finals = await state.bridge.run_to_end(request, tasks, CompletionFinal)
    return JSONResponse(whole(finals[0]))


async def count_tokens(request: Request) -> Response:
    """``/v1/chat/completions/input_tokens``: how many tokens the rendered chat takes."""
    state: AppState = request.app.state.pyllama
    return JSONResponse({"input_tokens": await count_chat_tokens(state, await json_body(request))})
