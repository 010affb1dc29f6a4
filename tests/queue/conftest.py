import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def no_uncaught_thread_exceptions():
    """Any exception that escapes a thread fails the test; no worker thread may outlive it."""
    caught = []
    old = threading.excepthook
    threading.excepthook = caught.append
    yield
    threading.excepthook = old
    assert not caught, f"uncaught thread exception: {caught[0].exc_value!r}"
    for t in threading.enumerate():
        if t.name == "pyllama-queue-worker":
            t.join(5)
            assert not t.is_alive(), "a queue worker thread outlived its test"
