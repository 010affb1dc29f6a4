#!/usr/bin/env python3
"""Reproduce ``vendor/llama.cpp`` from its pin in one command.

The pinned upstream llama.cpp is the copy that llama-cpp-python 0.3.36 ships in its source
distribution (upstream commit recorded below). We take only llama.cpp from that archive, verify
the archive's sha256, and copy the parts our build and tests need. Nothing is patched.

    python scripts/vendor_llama_cpp.py            # download with pip, verify, replace vendor/llama.cpp
    python scripts/vendor_llama_cpp.py --sdist F  # use an already downloaded archive
    python scripts/vendor_llama_cpp.py --full-tree DIR  # the whole pinned tree (to build llama-server)
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

SDIST_NAME = "llama-cpp-python"
SDIST_VERSION = "0.3.36"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
UPSTREAM_COMMIT = "0c1e57098"  # from llama-cpp-python's CHANGELOG for 0.3.36

ROOT = Path(__file__).resolve().parent.parent
DEST = ROOT / "vendor" / "llama.cpp"

MTMD_FILES = [
    "CMakeLists.txt",
    *(f"{name}.cpp" for name in ("mtmd", "mtmd-audio", "mtmd-image", "mtmd-helper", "mtmd-helper-gen", "clip")),
    *(f"{name}.h" for name in ("mtmd", "mtmd-internal", "mtmd-helper-common", "mtmd-helper", "mtmd-audio")),
    *(f"{name}.h" for name in ("mtmd-image", "clip", "clip-impl", "clip-model", "clip-graph")),
]

# Paths (relative to llama.cpp's root) that are copied whole.
KEEP = [
    "CMakeLists.txt",
    "LICENSE",
    "cmake",
    "include",
    "src",
    "ggml",
    "licenses",
    # vendor/CMakeLists.txt adds these unconditionally; cpp-httplib is only for common/.
    "vendor/CMakeLists.txt",
    "vendor/hash",
    "vendor/miniaudio",
    "vendor/nlohmann",
    "vendor/sheredom",
    "vendor/stb",
    # llama.cpp's common/ library: our C shim (csrc/) builds the part llama-server relies on for
    # request handling (JSON schema -> grammar; chat templates and tool-call parsing later).
    "common",
    # real chat templates (Qwen, Llama 3.x, Hermes, Mistral, Functionary, ...): the tool-call tests
    "models/templates",
    # llama.cpp's multimodal library (images and audio into a text model), built as libmtmd:
    # its sources, the per-model encoder graphs and the one debug header mtmd.cpp includes.
    *[f"tools/mtmd/{f}" for f in MTMD_FILES],
    "tools/mtmd/models",
    "tools/mtmd/debug/mtmd-debug.h",
    # Reference code read (not built) by our ports: the server queue.
    "tools/server/server-queue.h",
    "tools/server/server-queue.cpp",
]

# Vocab files used by the tests and by the tiny models we generate, with their test vectors.
VOCABS = ["llama-spm", "gpt-2"]
for _v in VOCABS:
    KEEP += [f"models/ggml-vocab-{_v}.gguf{ext}" for ext in ("", ".inp", ".out")]

# ggml backends we do not support building; dropping them keeps the tree small and lets our
# CMakeLists reject a request for one with a clear message.
DROPPED_BACKENDS = [
    "ggml-cann",
    "ggml-et",
    "ggml-hexagon",
    "ggml-opencl",
    "ggml-openvino",
    "ggml-sycl",
    "ggml-virtgpu",
    "ggml-vulkan",
    "ggml-webgpu",
    "ggml-zdnn",
    "ggml-zendnn",
]


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download(tmp: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "-d",
            str(tmp),
            f"{SDIST_NAME}=={SDIST_VERSION}",
        ],
        check=True,
    )
    (sdist,) = tmp.glob("*.tar.gz")
    return sdist


def extract(sdist: Path, tmp: Path) -> Path:
    prefix = f"llama_cpp_python-{SDIST_VERSION}/vendor/llama.cpp/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        tar.extractall(tmp, members=members, filter="data")
    return tmp / prefix


def copy_tree(src_root: Path) -> None:
    if DEST.exists():
        shutil.rmtree(DEST)
    for rel in KEEP:
        src, dst = src_root / rel, DEST / rel
        if not src.exists():
            raise SystemExit(f"pinned archive lacks {rel}")
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            shutil.copy2(src, dst)
    for name in DROPPED_BACKENDS:
        shutil.rmtree(DEST / "ggml" / "src" / name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sdist", type=Path, help="use this archive instead of downloading it")
    ap.add_argument(
        "--full-tree",
        type=Path,
        metavar="DIR",
        help="extract the whole pinned llama.cpp to DIR instead (nothing in vendor/ changes)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        sdist = args.sdist or download(tmp)
        digest = sha256_of(sdist)
        if digest != SDIST_SHA256:
            raise SystemExit(f"sha256 mismatch for {sdist}: {digest} != {SDIST_SHA256}")
        tree = extract(sdist, tmp)
        if args.full_tree:
            if args.full_tree.exists():
                shutil.rmtree(args.full_tree)
            shutil.copytree(tree, args.full_tree)
            print(f"{args.full_tree}: the whole pinned llama.cpp {UPSTREAM_COMMIT}")
            return
        copy_tree(tree)
    print(f"vendor/llama.cpp: upstream {UPSTREAM_COMMIT} from {SDIST_NAME} {SDIST_VERSION} ({SDIST_SHA256})")


if __name__ == "__main__":
    main()
