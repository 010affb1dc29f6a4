#!/usr/bin/env python3
"""Record one wheel build in ``benchmarks/wheel_builds.json`` (one entry per backend, replaced on rebuild).

Called by ``scripts/build_wheels.sh`` after auditwheel: the commit built, the machine, the tools'
versions, the CUDA architectures, the wall time of the build and the size of the wheel and of each
shared library in it. ``scripts/readme_figures.py`` makes the README's table from this file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import tempfile
import zipfile
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RECORD = REPO / "benchmarks" / "wheel_builds.json"


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO).stdout.strip()


def tree_commit(*records: Path) -> str:
    """HEAD's short hash, ``-dirty`` when tracked files changed (the ``records`` written by the
    run itself do not count)."""
    commit = _run("git", "rev-parse", "--short", "HEAD")
    excluded = [f":!{r.relative_to(REPO)}" for r in records]
    changed = _run("git", "status", "--porcelain", "--untracked-files=no", "--", ".", *excluded)
    return commit + ("-dirty" if changed else "")


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    found = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return found.group(1) if found else platform.processor()


def _libraries(wheel: Path) -> dict[str, int]:
    """Uncompressed size of each shared library in the wheel, by file name."""
    with zipfile.ZipFile(wheel) as zf:
        return {
            Path(info.filename).name: info.file_size
            for info in zf.infolist()
            if re.search(r"\.so(\.\d+)*$", info.filename)
        }


def _cuobjdump() -> str:
    """NVIDIA's cuobjdump: from its PyPI wheel (scripts/wheel-tools-cuda.txt), else PATH."""
    try:
        import nvidia

        for root in nvidia.__path__:
            for found in sorted(Path(root).glob("cu*/bin/cuobjdump")):
                return str(found)
    except ImportError:
        pass
    return "cuobjdump"


def _cuda_code(wheel: Path) -> dict[str, dict[str, int]]:
    """The GPU code in the wheel's CUDA module as its binary holds it (not as the flags asked):
    machine code (SASS) and PTX, each as the number of cubins or PTX files (one per CUDA source) per architecture."""
    found: dict[str, dict[str, int]] = {"sass": {}, "ptx": {}}
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory() as tmp:
        for name in zf.namelist():
            if Path(name).name.startswith("libggml-cuda"):
                lib = zf.extract(name, tmp)
                for kind, flag in (("sass", "--list-elf"), ("ptx", "--list-ptx")):
                    run = subprocess.run([_cuobjdump(), flag, lib], capture_output=True, text=True, check=True)
                    listing = run.stdout
                    for arch in re.findall(r"\.(sm_\d+[a-z]?)\.(?:cubin|ptx)", listing):
                        found[kind][arch] = found[kind].get(arch, 0) + 1
    return found


def build_entry(args: argparse.Namespace) -> dict[str, object]:
    wheel: Path = args.wheel
    entry: dict[str, object] = {
        "backend": args.backend,
        "commit": tree_commit(RECORD),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpus": os.cpu_count(), "cpu": _cpu_model(), "system": platform.platform()},
        "tools": {
            "c_compiler": args.compiler or _run("cc", "--version").splitlines()[0],
            **{name: metadata.version(name) for name in ("scikit-build-core", "cmake", "ninja", "cffi", "auditwheel")},
        },
        "build_seconds": args.seconds,
        "build_parallel": int(os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", os.cpu_count() or 1)),
        "wheel": wheel.name,
        "wheel_bytes": wheel.stat().st_size,
        "libraries_bytes": _libraries(wheel),
        "note": args.note,
    }
    if args.nvcc:
        release = re.search(r"release ([\d.]+), (V[\d.]+)", _run(args.nvcc, "--version"))
        entry["nvcc"] = " ".join(release.groups()) if release else "?"
        entry["cuda_archs"] = args.cuda_archs  # as asked; what the binary holds:
        entry["cuda_code"] = _cuda_code(wheel)
        entry["cublas"] = metadata.version("nvidia-cublas")
    return entry


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--seconds", type=int, required=True)
    ap.add_argument("--wheel", type=Path, required=True)
    ap.add_argument("--nvcc")
    ap.add_argument("--cuda-archs")
    ap.add_argument("--compiler", help="what compiled the libraries (default: cc --version)")
    ap.add_argument("--note", default=os.environ.get("WHEEL_BUILD_NOTE", ""), help="e.g. what else ran meanwhile")
    args = ap.parse_args()
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {"builds": {}}
    record["builds"][args.backend] = build_entry(args)
    RECORD.write_text(json.dumps(record, indent=2) + "\n")
    print(f"record_wheel_build: {args.backend} -> {RECORD.relative_to(REPO)}")


if __name__ == "__main__":
    main()
