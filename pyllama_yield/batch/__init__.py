"""OpenAI's Batch API, durable: uploaded files, batches of requests run at the lowest priority in
whatever capacity interactive work leaves, state in SQLite under a data folder."""

from __future__ import annotations

from .runner import BatchRunner
from .service import Batches
from .store import BatchStore, default_data_dir

__all__ = ["BatchRunner", "Batches", "BatchStore", "default_data_dir"]
