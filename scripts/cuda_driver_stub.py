#!/usr/bin/env python3
"""Write and compile a link-time stand-in for the NVIDIA driver library (``libcuda.so.1``).

ggml-cuda calls the driver API for its virtual-memory pool (``cuMemCreate``, ``cuMemMap``...),
so the CUDA module links ``libcuda.so``. A CUDA toolkit ships a stub of it under ``lib/stubs``;
the pip-installed compiler here does not. The stub exports every function ``cuda.h`` declares,
under the names the macros of ``cuda.h`` resolve to (``cuMemAlloc`` -> ``cuMemAlloc_v2``), with
the real library's soname, so the module records ``libcuda.so.1`` as needed and the user's driver
provides it at run time. The stub never ships: ``auditwheel repair --exclude libcuda.so.1``.

    cuda_driver_stub.py --cuda-include /usr/local/cuda/include --out build/cuda-stub/libcuda.so
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

# After preprocessing, a driver function reads "CUresult NAME(...)"; CUDAAPI expands to nothing.
_DECL = re.compile(r"\bCUresult\s+(cu[A-Za-z0-9_]+)\s*\(")


def driver_functions(cc: str, include: Path) -> list[str]:
    text = subprocess.run(
        [cc, "-E", "-P", "-I", str(include), "-x", "c", "-"],
        input="#include <cuda.h>\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(set(_DECL.findall(text)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuda-include", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cc", default="cc")
    args = ap.parse_args()
    names = driver_functions(args.cc, args.cuda_include)
    if not names:
        raise SystemExit("cuda_driver_stub: no driver functions found in cuda.h")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    source = args.out.with_suffix(".c")
    source.write_text("".join(f"int {name}(void) {{ return 999; }}\n" for name in names))
    subprocess.run(
        [args.cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(args.out), str(source)], check=True
    )
    print(f"cuda_driver_stub: {args.out} ({len(names)} functions)")


if __name__ == "__main__":
    main()
