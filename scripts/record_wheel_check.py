#!/usr/bin/env python3
"""Record where a wheel was run (``scripts/test_wheel_debian.sh``) in ``benchmarks/wheel_checks.json``:
the userland (CPU, system, glibc, Python), the CPU module ggml chose there, what pytest said. One
entry per wheel file and userland, replaced on a rerun. ``scripts/readme_figures.py`` makes the
README's table from this file."""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_wheel_build import REPO, tree_commit  # noqa: E402

RECORD = REPO / "benchmarks" / "wheel_checks.json"


def parse(log: str) -> dict[str, str]:
    """The facts a run printed: its userland line, the CPU module, the generation, pytest's summary."""
    userland = re.search(r"^userland: (.+)$", log, re.M)
    module = re.search(r"^module\s+backend CPU: (\S+)", log, re.M)
    speed = re.search(r"\[(\d+) prompt tokens at ([\d.]+) t/s, (\d+) generated at ([\d.]+) t/s\]", log)
    summary = re.findall(r"^=*\s*(\d+ passed.*?)\s*=*$", log, re.M)
    if not (userland and module and speed and summary):
        raise SystemExit("record_wheel_check: the log lacks the userland, module, generation or pytest lines")
    cpu, system, glibc, python = (part.strip() for part in userland[1].split("|"))
    return {
        "cpu": cpu,
        "system": system,
        "glibc": glibc.removeprefix("glibc "),
        "python": python,
        "cpu_module": module[1],
        "generated_tokens_per_s": speed[4],
        "pytest": summary[-1],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--wheel", type=Path, required=True)
    ap.add_argument("--log", type=Path, required=True)
    ap.add_argument("--tests", required=True, help="what pytest was given")
    args = ap.parse_args()
    entry = {
        "wheel": args.wheel.name,
        **parse(args.log.read_text(errors="replace")),
        "tests": args.tests,
        "commit": tree_commit(REPO / "benchmarks"),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {"checks": {}}
    record["checks"][f"{entry['wheel']} on {entry['system']} ({entry['cpu']})"] = entry
    RECORD.write_text(json.dumps(record, indent=2) + "\n")
    print(f"record_wheel_check: {entry['wheel']} on {entry['system']} -> {RECORD.relative_to(REPO)}")


if __name__ == "__main__":
    main()
