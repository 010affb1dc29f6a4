"""The chat flags of ``serve``: which template renders a conversation, and what happens to the
model's reasoning."""

from __future__ import annotations

from typing import Literal

from pydantic_settings import BaseSettings

from .fields import arg

__all__ = ["ChatSettings"]


class ChatSettings(BaseSettings):
    """A part of ``ServerSettings``: its fields are flags of ``serve``."""

    chat_template: str | None = arg(
        None,
        "--chat-template",
        env="LLAMA_ARG_CHAT_TEMPLATE",
        help="a built-in template name (chatml, llama3, ...) or a template",
    )
    chat_template_file: str | None = arg(None, "--chat-template-file", env="LLAMA_ARG_CHAT_TEMPLATE_FILE")
    jinja: bool = arg(
        True,
        "--jinja",
        neg=("--no-jinja",),
        env="LLAMA_ARG_JINJA",
        help="render chat templates with llama.cpp's Jinja engine (else its built-in formats)",
    )
    reasoning: Literal["on", "off", "auto"] = arg(
        "auto", "-rea", "--reasoning", help="thinking in chats: on, off, or auto (the template's default)"
    )
    reasoning_format: Literal["none", "deepseek", "deepseek-legacy", "auto"] = arg(
        "deepseek", "--reasoning-format", env="LLAMA_ARG_THINK", help="where reasoning goes in answers"
    )
    reasoning_budget: int = arg(
        -1,
        "--reasoning-budget",
        env="LLAMA_ARG_THINK_BUDGET",
        help="thinking tokens allowed (-1: no limit, 0: end thinking at once)",
    )
    reasoning_budget_message: str | None = arg(
        None,
        "--reasoning-budget-message",
        env="LLAMA_ARG_THINK_BUDGET_MESSAGE",
        help="text forced before the end-of-thinking tag when the budget is spent",
    )

    def chat_template_text(self) -> str | None:
        """``--chat-template`` (a name or a template) or the contents of ``--chat-template-file``."""
        if self.chat_template_file:
            with open(self.chat_template_file, encoding="utf-8") as f:
                return f.read()
        return self.chat_template
