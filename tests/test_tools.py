"""Chat templates with tools, through llama.cpp's own chat code (common_chat): real templates
from the pin (vendor/llama.cpp/models/templates), parsed answers, and an ``openai`` round trip."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest
from http_server import start_server, stop_server

from pyllama_yield.server.chat import Chat
from pyllama_yield.server.chat_message import ChatState
from pyllama_yield.testing import make_tiny_model

TEMPLATES = Path(__file__).resolve().parents[1] / "vendor" / "llama.cpp" / "models" / "templates"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ASK = [{"role": "user", "content": "Weather in Paris?"}]

# a template, and how that model family writes a call to get_weather(city="Paris")
HERMES_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
FAMILIES = {
    "Qwen-Qwen2.5-7B-Instruct.jinja": HERMES_CALL,
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": HERMES_CALL,
    "meta-llama-Llama-3.1-8B-Instruct.jinja": '{"name": "get_weather", "parameters": {"city": "Paris"}}',
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": (
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abcdefghi"}]'
    ),
    "meetkai-functionary-medium-v3.2.jinja": 'get_weather\n{"city": "Paris"}',
}


@pytest.fixture(scope="module")
def gpt2_model(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tools") / "tiny-gpt2.gguf", vocab="gpt-2")


@pytest.fixture(scope="module")
def model(gpt2_model):
    from pyllama_yield.llama import Model

    with Model(gpt2_model) as m:
        yield m


@pytest.mark.parametrize("template", sorted(FAMILIES))
def test_each_family_renders_tools_and_parses_its_calls(model, template):
    chat = Chat(model, (TEMPLATES / template).read_text())
    try:
        fields, parse = chat.render({"messages": ASK, "tools": [WEATHER]})
        assert "get_weather" in fields["prompt"]  # the tool is described to the model
        state = ChatState(parse)
        state.update(FAMILIES[template], is_partial=False)
        calls = state.message.openai()["tool_calls"]
        assert [c["function"]["name"] for c in calls] == ["get_weather"], (template, state.message)
        assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Paris"}
        assert calls[0]["id"]
    finally:
        chat.close()


def test_streamed_parsing_gives_openai_deltas(model):
    chat = Chat(model, (TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text())
    try:
        _, parse = chat.render({"messages": ASK, "tools": [WEATHER]})
        state = ChatState(parse)
        text = FAMILIES["Qwen-Qwen2.5-7B-Instruct.jinja"]
        deltas = []
        for i in range(0, len(text), 7):
            deltas += state.update(text[i : i + 7], is_partial=True)
        deltas += state.update("", is_partial=False)
        calls = [d.openai()["tool_calls"][0] for d in deltas if d.call is not None]
        assert calls[0]["function"]["name"] == "get_weather" and calls[0]["id"]
        args = "".join(c["function"].get("arguments", "") for c in calls)
        assert json.loads(args) == {"city": "Paris"}
        assert not any(d.content for d in deltas)  # the call's markup never leaks into content
    finally:
        chat.close()


def test_reasoning_is_split_out(model):
    chat = Chat(model, (TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text())
    try:
        _, parse = chat.render({"messages": ASK})
        state = ChatState(parse)
        state.update("<think>It is in France.</think>Sunny, probably.", is_partial=False)
        assert state.message.reasoning.strip() == "It is in France."
        assert state.message.content.strip() == "Sunny, probably."
    finally:
        chat.close()


# A random-weight model writes a call only where the grammar leaves it no choice: Functionary's
# grammar (tool_choice "required") makes it pick between free text and a call at the first token,
# and an enum leaves the arguments little room. The seeds are ones that pick a call (the model and
# its sampling are deterministic).
CITY = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}}, "required": ["city"]},
    },
}


@pytest.fixture(scope="module")
def tool_server(gpt2_model):
    template = TEMPLATES / "meetkai-functionary-medium-v3.2.jinja"
    proc, base = start_server(
        gpt2_model, "--threads", "1", "-np", "2", "-c", "4096", "--chat-template-file", str(template)
    )
    yield openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
    out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


def ask(client, **kw):
    # no prompt cache: a reused prefix changes the batch shapes, and a random model's choices with them
    return client.chat.completions.create(
        model="tiny",
        messages=ASK,
        tools=[CITY],
        tool_choice="required",
        max_tokens=40,
        temperature=0.8,
        extra_body={"cache_prompt": False},
        **kw,
    )


def test_openai_round_trip_with_tools(tool_server):
    first = ask(tool_server, seed=4)
    choice = first.choices[0]
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather" and json.loads(call.function.arguments)["city"] in ("Paris", "Rome")
    assert call.id and choice.message.content in (None, "")
    history = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 21}'},
    ]
    second = tool_server.chat.completions.create(model="tiny", messages=history, tools=[CITY], max_tokens=8)
    assert second.choices[0].message.role == "assistant" and second.usage.prompt_tokens > first.usage.prompt_tokens


def test_streamed_tool_calls_through_the_openai_client(tool_server):
    whole = ask(tool_server, seed=5).choices[0].message.tool_calls
    chunks = list(ask(tool_server, seed=5, stream=True))
    pieces = [tc for c in chunks if c.choices and c.choices[0].delta.tool_calls for tc in c.choices[0].delta.tool_calls]
    first = [p for p in pieces if p.index == 0]
    assert first[0].function.name == "get_weather" and first[0].id
    assert "".join(p.function.arguments or "" for p in first) == whole[0].function.arguments
    assert len({p.index for p in pieces}) == len(whole)


def test_anthropic_messages_with_tools_streaming_and_not(tool_server):
    import httpx

    base = str(tool_server.base_url).removesuffix("/v1/").removesuffix("/v1")
    tools = [{"name": "get_weather", "description": "weather", "input_schema": CITY["function"]["parameters"]}]
    body = {
        "model": "tiny",
        "max_tokens": 40,
        "temperature": 0.8,
        "seed": 4,
        "cache_prompt": False,  # a llama-server field: no reused prefix, the same numbers every run
        "tool_choice": {"type": "any"},
        "tools": tools,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]}],
    }
    msg = httpx.post(f"{base}/v1/messages", json=body, timeout=60).json()
    assert msg["type"] == "message" and msg["role"] == "assistant" and msg["id"].startswith("msg_")
    uses = [b for b in msg["content"] if b["type"] == "tool_use"]
    assert uses and uses[0]["name"] == "get_weather" and uses[0]["input"]["city"] in ("Paris", "Rome")
    assert msg["usage"]["input_tokens"] > 0 and msg["usage"]["output_tokens"] > 0
    events = []
    with httpx.stream("POST", f"{base}/v1/messages", json={**body, "stream": True}, timeout=60) as r:
        name = None
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[6:])))
    kinds = [e for e, _ in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    starts = [d["content_block"] for e, d in events if e == "content_block_start"]
    assert starts[0]["type"] == "tool_use" and starts[0]["name"] == "get_weather"
    partial = "".join(d["delta"]["partial_json"] for e, d in events if e == "content_block_delta" and d["index"] == 0)
    assert json.loads(partial)["city"] in ("Paris", "Rome")
    # the tool's result goes back as a tool_result block; the answer comes out as text
    follow = {**body, "tool_choice": {"type": "auto"}, "max_tokens": 6, "messages": [
        *body["messages"],
        {"role": "assistant", "content": [{"type": "tool_use", "id": uses[0]["id"], "name": "get_weather",
                                           "input": uses[0]["input"]}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0]["id"], "content": "21 C"}]},
    ]}  # fmt: skip
    answer = httpx.post(f"{base}/v1/messages", json=follow, timeout=60).json()
    assert answer["type"] == "message" and answer["stop_reason"] in ("end_turn", "max_tokens", "tool_use")
    count = httpx.post(f"{base}/v1/messages/count_tokens", json=follow, timeout=60).json()
    assert count["input_tokens"] > msg["usage"]["input_tokens"]


def test_tool_calls_through_the_sdks_streaming_helpers(tool_server):
    """The official clients' helpers rebuild a streamed tool call from the events (OpenAI's
    Responses helper indexes the output by each event's output_index)."""
    kw = dict(model="tiny", messages=ASK, tools=[CITY], tool_choice="required", max_tokens=40, temperature=0.8)
    # seed 8 ends with its calls (others write on and run out of tokens, which the helper refuses)
    with tool_server.chat.completions.stream(**kw, seed=8, extra_body={"cache_prompt": False}) as stream:
        deltas = [e for e in stream if e.type == "tool_calls.function.arguments.delta"]
        final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls
    assert "".join(e.arguments_delta for e in deltas) == "".join(c.function.arguments for c in calls)
    assert calls[0].function.name == "get_weather"
    assert json.loads(calls[0].function.arguments)["city"] in ("Paris", "Rome")

    tool = {"type": "function", "name": "get_weather", "parameters": CITY["function"]["parameters"]}
    with tool_server.responses.stream(
        model="tiny", input=ASK, tools=[tool], tool_choice="required", max_output_tokens=40, temperature=0.8,
        extra_body={"seed": 4, "cache_prompt": False},
    ) as stream:  # fmt: skip
        events = list(stream)
        response = stream.get_final_response()
    (fc,) = [o for o in response.output if o.type == "function_call"][:1]
    deltas = "".join(e.delta for e in events if e.type.endswith("arguments.delta") and e.item_id == fc.id)
    assert fc.name == "get_weather" and fc.arguments == deltas and json.loads(deltas)["city"] in ("Paris", "Rome")
    assert [e.sequence_number for e in events] == list(range(len(events)))

    anthropic = pytest.importorskip("anthropic")
    base = str(tool_server.base_url).removesuffix("/v1/").removesuffix("/v1")
    tools = [{"name": "get_weather", "description": "weather", "input_schema": CITY["function"]["parameters"]}]
    with anthropic.Anthropic(base_url=base, api_key="x", max_retries=0) as client, client.messages.stream(
        model="tiny", max_tokens=40, tools=tools, tool_choice={"type": "any"},
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        extra_body={"temperature": 0.8, "seed": 4, "cache_prompt": False},
    ) as stream:  # fmt: skip
        events = list(stream)
        message = stream.get_final_message()
    first = next(i for i, b in enumerate(message.content) if b.type == "tool_use")
    partial = "".join(
        e.delta.partial_json for e in events if e.type == "content_block_delta" and e.index == first
    )  # fmt: skip
    use = message.content[first]
    assert use.name == "get_weather" and use.input == json.loads(partial) and use.input["city"] in ("Paris", "Rome")


RESPONSES_TOOL = {"type": "function", "name": "get_weather", "description": "weather", **{
    "parameters": CITY["function"]["parameters"]}}  # fmt: skip


def test_openai_responses_with_tools_streaming_and_not(tool_server):
    """``/v1/responses`` through the openai client: function calls as output items, their result
    sent back as a function_call_output item, the answer as a message; streamed as named events."""
    kw = dict(
        model="tiny",
        input=[{"role": "user", "content": "Weather in Paris?"}],
        instructions="You answer with tools.",
        tools=[RESPONSES_TOOL],
        tool_choice="required",
        max_output_tokens=40,
        temperature=0.8,
        extra_body={"seed": 4, "cache_prompt": False},
    )
    res = tool_server.responses.create(**kw)
    assert res.id.startswith("resp_") and res.status == "completed" and res.object == "response"
    (call,) = [o for o in res.output if o.type == "function_call"][:1]
    assert call.name == "get_weather" and call.call_id.startswith("call_") and call.id.startswith("fc_")
    assert json.loads(call.arguments)["city"] in ("Paris", "Rome")
    assert res.usage.input_tokens > 0 and res.usage.output_tokens > 0

    events = list(tool_server.responses.create(**kw, stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    added = [e.item for e in events if e.type == "response.output_item.added"]
    assert added[0].type == "function_call" and added[0].name == "get_weather"
    deltas = [e for e in events if e.type == "response.function_call_arguments.delta"]
    args = "".join(e.delta for e in deltas if e.item_id == added[0].id)
    assert json.loads(args) == json.loads(call.arguments)  # the same seed: the same call
    assert events[-1].response.id == events[0].response.id

    follow = {**kw, "tool_choice": "auto", "max_output_tokens": 6, "input": [
        *kw["input"],
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "21 C"},
    ]}  # fmt: skip
    answer = tool_server.responses.create(**follow)
    assert answer.status == "completed" and answer.usage.input_tokens > res.usage.input_tokens
    count = tool_server.post("/responses/input_tokens", body={"input": follow["input"]}, cast_to=object)
    assert count["object"] == "response.input_tokens" and count["input_tokens"] > 0
    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        tool_server.responses.create(**kw, previous_response_id="resp_x")


def test_openai_responses_text_streaming_and_not(tool_server):
    kw = dict(
        model="tiny",
        input="Say something.",
        max_output_tokens=8,
        temperature=0.0,
        extra_body={"ignore_eos": True, "cache_prompt": False},
    )
    res = tool_server.responses.create(**kw)
    (msg,) = res.output
    assert msg.type == "message" and msg.id.startswith("msg_") and res.output_text
    assert res.usage.output_tokens == 8
    events = list(tool_server.responses.create(**kw, stream=True))
    by_type = {e.type: e for e in events}
    msg_id = by_type["response.output_item.added"].item.id
    for kind in ("response.content_part.added", "response.output_text.done", "response.content_part.done"):
        assert by_type[kind].item_id == msg_id
    assert by_type["response.output_item.done"].item.id == msg_id
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == by_type["response.output_text.done"].text == by_type["response.completed"].response.output_text
    assert text == res.output_text  # greedy: the same answer streamed or not


def test_a_growing_message_gives_typed_deltas_and_keeps_tool_call_ids():
    """``message_deltas``: text that grew is streamed (a reading that rewrote earlier text is
    not), a new call comes with its id and name, a growing one with its added arguments only."""
    from pyllama_yield.server.chat_message import MessageDelta, ParsedMessage, ToolCall, message_deltas

    one = ParsedMessage(content="Hel", reasoning="hm")
    two = ParsedMessage(content="Hello", reasoning="hm", tool_calls=(ToolCall("a1", "f", '{"x"'),))
    three = ParsedMessage(content="Bye", reasoning="hm, ok", tool_calls=(ToolCall("a1", "f", '{"x": 1}'),))
    assert message_deltas(one, two) == [
        MessageDelta(content="lo"),
        MessageDelta(call=two.tool_calls[0], call_index=0, new_call=True, arguments='{"x"'),
    ]
    deltas = message_deltas(two, three)
    grown = MessageDelta(call=three.tool_calls[0], call_index=0, arguments=": 1}")
    assert deltas == [MessageDelta(reasoning=", ok"), grown]  # "Hello" -> "Bye" rewrote: not streamed
    assert [d.openai() for d in deltas] == [
        {"reasoning_content": ", ok"},
        {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]},
    ]
    assert three.openai()["tool_calls"] == [
        {"type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}, "id": "a1"}
    ]
    assert ParsedMessage(tool_calls=three.tool_calls).openai()["content"] is None  # only tools: null content
