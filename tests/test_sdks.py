"""The official ``openai`` and ``anthropic`` Python clients, their streaming helpers included, run to
completion against ours. The helpers rebuild the answer from the stream's events (OpenAI's
Responses helper indexes the output by each event's ``output_index``/``content_index``) and refuse
an answer cut by the token limit, so each request here is constrained to end by itself by a small
JSON schema (the tiny model gets llama.cpp's built-in ``llama3`` template: its grammar starts where
the template's generation prompt ends). Tool calls through the helpers: ``test_tools.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
from http_server import start_server, stop_server  # noqa: E402
from pydantic import BaseModel  # noqa: E402


class Answer(BaseModel):
    ok: bool


SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
MESSAGES = [{"role": "user", "content": "Is it warm?"}]


@pytest.fixture(scope="module")
def base(tiny_model_path: Path) -> Iterator[str]:
    proc, url = start_server(tiny_model_path, "--threads", "1", "--chat-template", "llama3")
    yield url
    out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


@pytest.fixture(scope="module")
def oai(base: str):  # noqa: ANN201 - openai.OpenAI
    with openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0) as client:
        yield client


def test_chat_completions_stream_helper(oai) -> None:  # noqa: ANN001
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}
    with oai.chat.completions.stream(model="x", messages=MESSAGES, max_tokens=64, response_format=fmt) as stream:
        deltas = [e.delta for e in stream if e.type == "content.delta"]
        final = stream.get_final_completion()
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == "".join(deltas)
    Answer.model_validate_json(final.choices[0].message.content)


def test_structured_output_parse(oai) -> None:  # noqa: ANN001
    got = oai.chat.completions.parse(model="x", messages=MESSAGES, max_tokens=64, response_format=Answer)
    assert isinstance(got.choices[0].message.parsed, Answer)


def test_responses_stream_helper(oai) -> None:  # noqa: ANN001
    fmt = {"format": {"type": "json_schema", "name": "answer", "schema": SCHEMA}}
    with oai.responses.stream(model="x", input="Is it warm?", max_output_tokens=64, text=fmt) as stream:
        events = list(stream)
        final = stream.get_final_response()
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert final.output_text == deltas and Answer.model_validate_json(deltas)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [e.output_index for e in added] == list(range(len(added)))


def test_responses_parse(oai) -> None:  # noqa: ANN001
    parsed = oai.responses.parse(model="x", input="Is it warm?", max_output_tokens=64, text_format=Answer)
    assert isinstance(parsed.output_parsed, Answer)


def test_anthropic_messages_stream_helper(base: str) -> None:
    with anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0) as client:
        with client.messages.stream(model="x", max_tokens=8, messages=MESSAGES) as stream:
            streamed = "".join(stream.text_stream)
            final = stream.get_final_message()
        assert final.content[0].text == streamed and final.stop_reason == "max_tokens"
        assert final.usage.output_tokens == 8
