#!/usr/bin/env python3
"""Write the C source of the cffi module binding ``csrc/common_shim.h`` (API mode).

The header is our own narrow C interface to llama.cpp's common/ library; its declarations are
read from the header itself (comments and preprocessor lines dropped), never retyped here.

    python scripts/gen_common_cffi.py csrc/common_shim.h OUT.c
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import cffi


def declarations(header: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", header, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    lines = [ln.replace("PYLY_API ", "") for ln in lines if ln.strip() not in ('extern "C" {', "}")]
    return "\n".join(lines)


def main() -> None:
    header, out = Path(sys.argv[1]), Path(sys.argv[2])
    ffi = cffi.FFI()
    ffi.cdef(declarations(header.read_text()))
    ffi.set_source("pyllama_yield._common_cffi", f'#include "{header.name}"')
    ffi.emit_c_code(str(out))


if __name__ == "__main__":
    main()
