"""Many requests through the in-process engine, answered in order (``Llama.create_completions``,
``Llama.create_chat_completions``): one more request in flight than the engine has slots, so every
slot stays busy while the queue stays short, each request built and awaited on a thread of its
own (tokenizing and waiting release the GIL); a progress bar on a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any, TypeVar

__all__ = ["answer_in_order"]

T = TypeVar("T")
R = TypeVar("R")


def answer_in_order(
    run_one: Callable[[T], R], items: Sequence[T], in_flight: int, progress: bool | None, desc: str
) -> list[R]:
    """``[run_one(item) for item in items]``, ``in_flight`` at a time. ``progress``: a tqdm bar on
    stderr (None: when stderr is a terminal and tqdm is installed). The first failure is raised
    once the requests already running are done; the rest do not start."""
    show = sys.stderr.isatty() if progress is None else progress
    with ThreadPoolExecutor(max(1, in_flight), thread_name_prefix="pyllama-many") as pool:
        futures = [pool.submit(run_one, item) for item in items]
        bar = _bar(len(items), desc) if show else None
        try:
            for done in as_completed(futures):
                if done.exception() is not None:
                    _cancel(futures)
                    break
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        return [f.result() for f in futures]


def _cancel(futures: list[Future[Any]]) -> None:
    for f in futures:
        f.cancel()


def _bar(total: int, desc: str) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # no bar without tqdm
        return None
    return tqdm(total=total, desc=desc, unit="req", file=sys.stderr)
