"""What goes through the queue: tasks in, results out, and the error for misusing it."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["QueueError", "Result", "Task", "TaskType"]


class QueueError(RuntimeError):
    """Misuse of the queue: nested yield, yield off the loop thread, declining while not yielding,
    starting the loop twice, receiving after the response queue was terminated."""


class TaskType(enum.Enum):
    COMPLETION = "completion"
    EMBEDDING = "embedding"
    CANCEL = "cancel"
    METRICS = "metrics"
    SLOT_SAVE = "slot_save"
    SLOT_RESTORE = "slot_restore"
    SLOT_ERASE = "slot_erase"
    SET_LORA = "set_lora"
    TOKENIZE = "tokenize"
    DETOKENIZE = "detokenize"
    NEXT_RESPONSE = "next_response"  # posted by a busy server to itself: run update-slots again


@dataclass
class Task:
    type: TaskType
    id: int = -1
    id_target: int = -1  # for CANCEL: the task to cancel
    id_slot: int = -1  # the slot the task asks for, -1 for any
    payload: Any = None
    # who asked and how urgently, for the choice of a deferred task (fair_share.py)
    tenant: str = ""
    priority: int = 0  # lower is sooner


@dataclass
class Result:
    id: int
    payload: object = None  # the server's typed results (server/results.py); the queue never reads it
    is_error: bool = False
    is_final: bool = True
