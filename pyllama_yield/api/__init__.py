"""The HTTP layer: llama-server's routes and the OpenAI-compatible ones. It knows requests, never slots.

- ``app``: the Starlette app, auth, error handling, the route table;
- ``native``, ``openai``: the routes of each family; ``protocol``: OpenAI request shapes;
- ``bridge``: tasks in, results out, server-sent events; ``errors``, ``prometheus``: output shapes.
"""

from __future__ import annotations

from .app import build_app

__all__ = ["build_app"]
