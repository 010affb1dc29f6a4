"""``serve`` settings: llama-server's command line, its ``LLAMA_ARG_*`` environment variables and the
per-request sampling defaults, from one definition (``ServerSettings``; its field groups live in
this package's modules)."""

from .fields import UnsupportedFlagError
from .router import ROUTER_FIELDS
from .server import ServerSettings

__all__ = ["ROUTER_FIELDS", "ServerSettings", "UnsupportedFlagError"]
