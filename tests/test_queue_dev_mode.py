"""The queue conformance suite once more under ``python -X dev`` (uncaught thread exceptions fail it)."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_queue_suite_under_dev_mode():
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "dev",
            "-P",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "not stress",
            "-W",
            "error::ResourceWarning",
            str(REPO / "tests" / "queue"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout
