"""The HTTP layer: llama-server's routes and the OpenAI-compatible ones. It knows requests, never slots.

- ``app``: the Starlette app, auth, error handling, the route table;
- ``native``, ``openai``, ``chat``, ``anthropic``, ``responses``: the routes of each family; the
  chat families translate their shape to an OpenAI chat body and take the engine's one chat path
  (``server/chat_request.py``); ``protocol``: ``/v1/completions``' fields;
- ``bridge``: tasks in, results out, server-sent events; ``errors``, ``prometheus``: output shapes.
"""

from __future__ import annotations

from .app import build_app

__all__ = ["build_app"]
