"""What a completion task carries to the server context: prompt tokens, parameters, its place in
the request. The HTTP layer builds these off the loop thread (tokenizing releases the GIL), so
the loop thread only decodes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .task_params import TaskParams

__all__ = ["CompletionTask", "tokenize_prompts"]


@dataclass
class CompletionTask:
    prompt_tokens: list[int]
    params: TaskParams = field(default_factory=TaskParams)
    index: int = 0  # which prompt (times n_cmpl) of the request this answers
    prompt_text: str = ""  # echoed back as "prompt" in native answers
    media: dict[int, Any] = field(default_factory=dict)  # first cell -> mtmd chunk (media.py)


def _is_token(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def tokenize_prompts(prompt: Any, tokenize: Any, multimodal: Any = None) -> list[list[int]]:
    """llama-server's prompt forms: a string, token ids, ids mixed with strings (one prompt), a
    ``{"prompt_string", "multimodal_data"}`` object, or a list of any of those (several prompts).
    ``tokenize(text, add_special)`` gives the tokens; ``multimodal(text, files)`` those of a text
    with media (``media.MediaTokens``), None when the model takes none.

    BOS (when the vocab wants one) goes only before a leading string, as llama-server does."""
    if isinstance(prompt, list) and not any(_is_token(p) for p in prompt):
        prompts = [_one_prompt(p, tokenize, multimodal) for p in prompt]
    else:
        prompts = [_one_prompt(prompt, tokenize, multimodal)]
    if not prompts:
        raise ValueError('"prompt" must not be empty')
    return prompts


def _one_prompt(prompt: Any, tokenize: Any, multimodal: Any) -> list[int]:
    if isinstance(prompt, dict) and "prompt_string" in prompt:
        if "multimodal_data" in prompt:
            if multimodal is None:
                raise ValueError("Multimodal data provided, but model does not support multimodal requests.")
            files = prompt["multimodal_data"]
            if not isinstance(files, list) or not isinstance(prompt["prompt_string"], str):
                raise ValueError('"multimodal_data" must be a list of base64 strings, with a string "prompt_string"')
            return multimodal(prompt["prompt_string"], files)
        prompt = prompt["prompt_string"]
    if isinstance(prompt, str):
        return tokenize(prompt, True)
    if isinstance(prompt, list) and all(_is_token(p) or isinstance(p, str) for p in prompt):
        tokens: list[int] = []
        for i, part in enumerate(prompt):
            tokens += tokenize(part, i == 0) if isinstance(part, str) else [part]
        return tokens
    raise ValueError(
        '"prompt" elements must be a string, a list of tokens, a JSON object containing a prompt string, '
        "or a list of mixed strings & tokens."
    )
