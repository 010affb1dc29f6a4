"""llama.cpp's common/ library, through the narrow C interface of ``csrc/common_shim.h``.

llama-server handles requests with pieces that live in common/, not in libllama: the JSON-schema
to grammar converter and ``common_sampler`` (its sampler chain order, grammar by rejection
sampling, lazy grammars). We call those same pieces rather than re-implementing them, so a
request samples here exactly as it does in llama-server. Each call is one cffi call (the GIL is
released); C++ exceptions arrive as error strings and are raised as Python exceptions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NoReturn, TypeVar

import numpy as np

from ._common_cffi import ffi, lib
from ._native import ffi as llama_ffi
from .llama import Batch, Context, LlamaError, Model
from .llama.owner import Owner

E = TypeVar("E", bound=Exception)

__all__ = [
    "ChatParser",
    "ChatTemplates",
    "CommonSampler",
    "decode_and_sample",
    "json_schema_to_grammar",
    "sample_and_accept_many",
]


def _take_string(ptr: Any) -> str:
    try:
        return ffi.string(ptr).decode("utf-8", "replace")
    finally:
        lib.pyly_free(ptr)


def _error(message: Any, what: str, exc_type: type[E]) -> E:
    """``exc_type("what: <the C side's message>")``, freeing the message (``char *``, may be NULL)."""
    return exc_type(f"{what}: {_take_string(message) if message != ffi.NULL else 'unknown error'}")


def _raise_from(error: Any, what: str, exc_type: type[Exception]) -> NoReturn:
    raise _error(error[0], what, exc_type)


def _sample_error(message: Any) -> LlamaError:
    return _error(message, "sampling failed", LlamaError)


def _accept_error(message: Any, token: int) -> LlamaError:
    return _error(message, f"the grammar cannot accept token {token}", LlamaError)


def json_schema_to_grammar(schema: dict[str, Any] | list[Any] | bool | str) -> str:
    """GBNF for a JSON schema (a parsed schema or its JSON text), as llama-server converts it.

    Raises ``ValueError`` with llama.cpp's reason for a schema it cannot convert."""
    text = schema if isinstance(schema, str) else json.dumps(schema)
    error = ffi.new("char **")
    out = lib.pyly_json_schema_to_grammar(text.encode(), error)
    if out == ffi.NULL:
        _raise_from(error, "cannot convert the JSON schema to a grammar", ValueError)
    return _take_string(out)


def _void(ptr: Any) -> Any:
    """A llama.h pointer as this module's ``void *`` (the two cffi modules do not share types)."""
    return ffi.cast("void *", int(llama_ffi.cast("uintptr_t", ptr)))


class CommonSampler(Owner):
    """llama-server's sampler for one request (``common_sampler``).

    ``params`` holds ``common_params_sampling`` fields under their C++ names (``temp``,
    ``penalty_last_n``, ``logit_bias`` as ``[[token, bias], ...]``, ``samplers`` as names,
    ``grammar``, ...); fields left out keep llama.cpp's defaults."""

    _what = "sampler"

    def __init__(self, model: Model, params: dict[str, Any]) -> None:
        error = ffi.new("char **")
        ptr = lib.pyly_sampler_init(_void(model.ptr), json.dumps(params).encode(), error)
        if ptr == ffi.NULL:
            _raise_from(error, "invalid sampling parameters", ValueError)
        super().__init__(ptr, lib.pyly_sampler_free)
        self._model = model  # the sampler reads the model's vocab
        self.params = params

    def reset(self) -> bool:
        """Back to the state it was made in, as a new sampler from the same ``params`` would be
        (histories cleared, random states seeded again); False for one with a grammar or a
        reasoning budget, which a reset does not bring back."""
        return lib.pyly_sampler_reset(self.ptr) == 0

    def sample(self, ctx: Context, idx: int = -1) -> int:
        """Sample from output ``idx`` of the last decode (the token is not accepted yet)."""
        error = ffi.new("char **")
        token = lib.pyly_sampler_sample(self.ptr, _void(ctx.ptr), idx, error)
        if token < 0:
            raise _sample_error(error[0])
        return token

    def accept(self, token: int, is_generated: bool = True) -> None:
        """Feed ``token`` to the chain (penalties, DRY, ...) and, when generated, to the grammar."""
        error = ffi.new("char **")
        if lib.pyly_sampler_accept(self.ptr, token, int(is_generated), error) != 0:
            raise _accept_error(error[0], token)

    def accept_prompt(self, tokens: Sequence[int]) -> None:
        """Feed a prompt's tokens to the chain (its penalties look back over the prompt too) in
        one C call; negative ones (media cells) are skipped."""
        error = ffi.new("char **")
        if lib.pyly_sampler_accept_prompt(self.ptr, ffi.new("int[]", list(tokens)), len(tokens), error) != 0:
            _raise_from(error, "the sampler refused the prompt", ValueError)

    def candidates(self, n: int) -> tuple[np.ndarray, np.ndarray, float]:
        """The top ``n`` candidates the last sample's chain left (ids, probabilities, sorted) and
        the probability of the sampled token among them all."""
        ids = np.empty(max(n, 1), dtype=np.int32)
        probs = np.empty(max(n, 1), dtype=np.float32)
        p_selected = ffi.new("float *")
        k = lib.pyly_sampler_candidates(
            self.ptr, n, ffi.from_buffer("int[]", ids), ffi.from_buffer("float[]", probs), p_selected
        )
        return ids[:k], probs[:k], float(p_selected[0])


def sample_and_accept_many(
    samplers: Sequence[CommonSampler], ctx: Context, idxs: Sequence[int], n_threads: int
) -> list[int | LlamaError]:
    """Sample (and accept) one token per sampler, sampler ``i`` from output ``idxs[i]`` of the last
    decode, in one call on up to ``n_threads`` threads; a sampler that fails gets its error (as
    :meth:`CommonSampler.sample` or :meth:`CommonSampler.accept` would raise it) in its place.

    A big vocabulary makes each sample a pass over every logit (Gemma 3: 262,144), so with many
    slots this is most of the step's CPU time that is not the decode; llama-server samples its
    slots one after the other on one thread while the CPU backend's other threads wait."""
    call = _ManySamples(samplers, idxs)
    lib.pyly_sampler_sample_accept_many(call.ptrs, _void(ctx.ptr), call.idxs, call.n, n_threads, *call.outputs)
    return call.results()


def decode_and_sample(
    ctx: Context,
    batch: Batch,
    samplers: Sequence[CommonSampler],
    idxs: Sequence[int],
    n_threads: int,
    doorbells: Sequence[int] = (),
) -> list[int | LlamaError]:
    """``ctx.decode(batch)`` (its errors raised the same way), then :func:`sample_and_accept_many`,
    in one C call: the GIL is released once for the whole step, and ``doorbells`` (pipes of event
    loops waiting for the step's earlier results, see ``queue.ring``) are rung in it just before
    the decode, so that no woken loop takes the GIL between the two."""
    call = _ManySamples(samplers, idxs)
    rings = list(doorbells)
    code = ffi.new("int *")

    def decode(ctx_ptr: Any, batch_ptr: Any) -> int:
        lib.pyly_decode_sample_accept_many(
            _void(ctx_ptr), _void(llama_ffi.addressof(batch_ptr)), rings, len(rings), code,
            call.ptrs, call.idxs, call.n, n_threads, *call.outputs,
        )  # fmt: skip
        return int(code[0])

    ctx.decode_with(batch, decode)
    return call.results()


class _ManySamples:
    """The arrays one many-sampler call takes and fills, and its results read back."""

    def __init__(self, samplers: Sequence[CommonSampler], idxs: Sequence[int]) -> None:
        n = self.n = len(samplers)
        if len(set(map(id, samplers))) != n:
            raise ValueError("each sampler may appear once")
        self.ptrs = ffi.new("pyly_sampler *[]", [s.ptr for s in samplers])
        self.idxs = list(idxs)
        self.tokens = ffi.new("int[]", n)
        self.status = ffi.new("int[]", n)
        self.errors = ffi.new("char *[]", n)
        self.outputs = (self.tokens, self.status, self.errors)

    def results(self) -> list[int | LlamaError]:
        out: list[int | LlamaError] = []
        for i in range(self.n):
            status = self.status[i]
            if status == 0:
                out.append(self.tokens[i])
            elif status == 1:
                out.append(_sample_error(self.errors[i]))
            else:
                out.append(_accept_error(self.errors[i], self.tokens[i]))
        return out


def _json_call(fn: Any, *args: Any, what: str | None) -> dict[str, Any]:
    """``fn(*args, &error)``'s JSON answer; ``ValueError("what: <its error>")`` when it fails, or
    its error alone when ``what`` is None (a message that names its own cause, as llama-server
    answers it)."""
    error = ffi.new("char **")
    out = fn(*args, error)
    if out == ffi.NULL:
        if what is None:
            raise ValueError(_take_string(error[0]) if error[0] != ffi.NULL else "unknown error")
        _raise_from(error, what, ValueError)
    return json.loads(_take_string(out))


class ChatTemplates(Owner):
    """llama-server's chat templates (``common_chat_templates``): the model's own template (or an
    override: a template, or a built-in name such as ``chatml``), rendered by llama.cpp's Jinja
    engine, or by its built-in formats when ``use_jinja`` is false."""

    _what = "chat templates"

    def __init__(self, model: Model, template: str | None = None) -> None:
        error = ffi.new("char **")
        ptr = lib.pyly_chat_init(_void(model.ptr), (template or "").encode(), error)
        if ptr == ffi.NULL:
            _raise_from(error, "invalid chat template", ValueError)
        super().__init__(ptr, lib.pyly_chat_free)
        self._model = model

    def info(self) -> dict[str, Any]:
        """``source`` (the template), ``tool_use`` (its tool-use variant or ""), ``caps``."""
        return _json_call(lib.pyly_chat_info, self.ptr, what="chat template info")

    def apply(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Render a chat (``messages`` in OpenAI's shape, ``tools``, ``tool_choice``, ...): the
        prompt, and the grammar, triggers, stops and output parser that go with it."""
        # llama.cpp's own words (e.g. "... JSON schema error at #/properties/a: ..."), as
        # llama-server answers them: the cause may be the template, the tools or the schema
        return _json_call(lib.pyly_chat_apply, self.ptr, json.dumps(inputs).encode(), what=None)


class ChatParser(Owner):
    """Reads a chat answer's text back as a message (``common_chat_parse``) with the parameters its
    rendering gave (``format``, ``parser``, ``reasoning_format``, ``generation_prompt``, ...),
    read and loaded once: a streamed answer parses its whole text after every token, as
    llama-server does, and loading the output parser each time would cost more than the parse."""

    _what = "chat parser"

    def __init__(self, params: dict[str, Any]) -> None:
        error = ffi.new("char **")
        ptr = lib.pyly_chat_parser_init(json.dumps(params).encode(), error)
        if ptr == ffi.NULL:
            _raise_from(error, "invalid chat output parser", ValueError)
        super().__init__(ptr, lib.pyly_chat_parser_free)

    def parse(self, text: str, is_partial: bool) -> dict[str, Any]:
        """``content``, ``reasoning_content``, ``tool_calls`` of the text so far (ValueError
        when it cannot be read: a partial text may only become readable later)."""
        return _json_call(
            lib.pyly_chat_parser_parse, self.ptr, text.encode(), int(is_partial), what="cannot parse the output"
        )
