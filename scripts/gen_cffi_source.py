#!/usr/bin/env python3
"""Generate the cffi API-mode C source for ``pyllama_yield._llama_cffi`` from the vendored headers.

The declarations are not typed by hand: ``include/llama.h``, ``ggml-rpc.h`` and mtmd's
``mtmd.h``/``mtmd-helper.h`` (with the ggml headers they pull in) are run through the C
preprocessor with empty stand-ins for the libc headers, then reduced to what
``cffi.FFI.cdef`` accepts. The module is compiled in API mode against the real headers, so the C
compiler checks every struct layout and function signature we declare.

Only functions that the linked shared libraries really export are declared: the headers mention
a few that no library defines (e.g. ``ggml_threadpool_get_n_threads``), and declaring those would
make the module fail at import with an undefined symbol. The same rule drops ggml-rpc.h's
functions from a build without the RPC backend, or with it as a loadable module (GGML_BACKEND_DL):
those are reached through ``ggml_backend_reg_get_proc_address``, as llama.cpp's rpc-server does.
For each such function the module declares a function-pointer type ``pyly_fn_<name>`` made from
the header's own declaration (``ggml_threadpool_new`` of the CPU backend, when the CPU backend is a
module) and the compiler checks it against the header, so that the address a backend module
returns is called with the header's signature (``pyllama_yield._native.backend_function``).

Used by CMakeLists.txt at build time:
    gen_cffi_source.py --cc CC --include DIR... --lib LIB... --out _llama_cffi.c
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# libc headers that llama.h/ggml.h include; cffi already knows the types they define.
LIBC_STANDINS = ("stddef.h", "stdint.h", "stdio.h", "stdbool.h", "stdarg.h")

# Our C helpers and Python callbacks, compiled into the module beside the generated cdef.
EXTRA_CDEF = """
extern "Python" void _pyllama_log_callback(enum ggml_log_level, const char *, void *);
extern "Python" bool _pyllama_progress_callback(float, void *);
extern "Python" bool _pyllama_abort_callback(void *);
extern "Python" void _pyllama_fatal_callback(const char *);
bool pyllama_abort_on_flag(void * flag);
void pyllama_log_discard(enum ggml_log_level, const char *, void *);
void pyllama_abort_hold(const char * message);
#define RPC_PROTO_MAJOR_VERSION ...
#define RPC_PROTO_MINOR_VERSION ...
"""

# The headers whose declarations the module binds (found in the --include folders).
BOUND_HEADERS = ("llama.h", "ggml-rpc.h", "mtmd.h", "mtmd-helper.h")

EXTRA_SOURCE = """
#include "llama.h"
#include "ggml-rpc.h"
#include "mtmd.h"
#include "mtmd-helper.h"
#ifdef _WIN32
#include <windows.h>
#else
#include <unistd.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <sys/types.h>
#endif

static void _pyllama_fatal_callback(const char * message);

/* An abort callback that only reads a flag: ggml calls the abort callback between graph nodes,
   so a Python callback there would take the GIL many times per decode. Other threads set the
   flag through the buffer they own (a volatile int), no GIL needed on either side. */
static bool pyllama_abort_on_flag(void * flag) {
    return *(volatile int *) flag != 0;
}

/* Installed at interpreter exit: llama.cpp may still log from destructors after Python is gone. */
static void pyllama_log_discard(enum ggml_log_level level, const char * text, void * user_data) {
    (void) level; (void) text; (void) user_data;
}

/* ggml's abort hook while a server runs (pyllama_yield._native.hold_on_abort). ggml_abort() calls
   abort() once its hook returns, which would end the process and every client's connection when,
   say, an rpc-server dies mid-decode. The server is told why, then this thread never returns:
   the threads that wait on it stay stuck, the HTTP side goes on answering with the cause. */
static void pyllama_abort_hold(const char * message) {
    _pyllama_fatal_callback(message);
#if defined(__linux__)
    /* Never the main thread: parked, it would no longer run Python's signal handlers, and the
       process could not be ended by SIGTERM. There ggml's abort() goes ahead. */
    if ((pid_t) syscall(SYS_gettid) == getpid()) {
        return;
    }
#endif
    for (;;) {
#ifdef _WIN32
        Sleep(INFINITE);
#else
        pause();
#endif
    }
}
"""


def preprocess(cc: str, headers: tuple[str, ...], include_dirs: list[Path]) -> str:
    with tempfile.TemporaryDirectory() as fake:
        for name in LIBC_STANDINS:
            (Path(fake) / name).touch()
        bound = Path(fake) / "bound.h"
        bound.write_text("".join(f'#include "{h}"\n' for h in headers))
        cmd = [cc, "-E", "-P", "-nostdinc", f"-I{fake}"]
        cmd += [f"-I{d}" for d in include_dirs]
        # attributes and _Noreturn are meaningless to cffi
        cmd += ["-D__attribute__(x)=", "-D_Noreturn=", str(bound)]
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def split_declarations(text: str) -> list[str]:
    """Top-level declarations, each ending at a ';' outside braces."""
    decls, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == ";" and depth == 0:
            decls.append(text[start : i + 1].strip())
            start = i + 1
    return [d for d in decls if d]


FUNC_NAME = re.compile(r"(\w+)\s*\(")


def function_name(decl: str) -> str | None:
    """Name of a function declaration, None for types, typedefs and variables."""
    if decl.startswith(("typedef", "struct", "enum", "union")) and "{" in decl:
        return None
    if decl.startswith(("typedef", "static const")) or "(" not in decl:
        return None
    m = FUNC_NAME.search(decl)
    return m.group(1) if m else None


def exported_symbols(libs: list[Path]) -> set[str]:
    nm = shutil.which("nm")
    if nm is None:
        raise SystemExit("gen_cffi_source: 'nm' is needed to read the libraries' exports")
    names: set[str] = set()
    for lib in libs:
        flags = ["-gU"] if sys.platform == "darwin" else ["-D", "--defined-only"]
        out = subprocess.run([nm, *flags, str(lib)], check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[1] in "TtWiV":
                names.add(parts[2].lstrip("_") if sys.platform == "darwin" else parts[2])
    return names


ARRAY_EXPR = re.compile(r"\[([^\]]*[^\]\d\s][^\]]*)\]")
STATIC_CONST_INIT = re.compile(r"^(static const [\w\s]+?\w+)\s*=.*;$", re.S)


def reduce_for_cffi(decls: list[str], exports: set[str]) -> tuple[list[str], list[str]]:
    """Return (declarations cffi accepts, names of declared-but-not-exported functions)."""
    kept, seen, missing = [], set(), []
    for decl in decls:
        name = function_name(decl)
        if name is not None and name not in exports:
            missing.append(name)
            continue
        # array sizes that are expressions: API mode lets the compiler fill them in
        decl = ARRAY_EXPR.sub("[...]", decl)
        # `static const T X = expr;` -> `static const T X;` (value taken from the compiled header)
        decl = STATIC_CONST_INIT.sub(r"\1;", decl)
        if decl in seen:  # ggml-backend.h repeats a typedef
            continue
        seen.add(decl)
        kept.append(decl)
    return kept, missing


def pointer_typedefs(decls: list[str], missing: list[str]) -> tuple[list[str], str]:
    """``typedef RET (*pyly_fn_NAME)(ARGS);`` for each declared-but-not-exported function, and the C
    checks (GCC/Clang) that each type is exactly the header's ``__typeof__(&NAME)``."""
    typedefs, sources, checks = [], [], []
    wanted = set(missing)
    for decl in decls:
        name = function_name(decl)
        if name not in wanted or "..." in decl:
            continue
        bare = re.sub(r"^extern\s+", "", decl)
        typedef = "typedef " + re.sub(rf"\b{name}\s*\(", f"(*pyly_fn_{name})(", bare, count=1)
        typedefs.append(ARRAY_EXPR.sub("[...]", typedef))
        sources.append(typedef)
        checks.append(
            f"_Static_assert(__builtin_types_compatible_p(pyly_fn_{name}, __typeof__(&{name})),"
            f' "pyly_fn_{name} differs from its header");'
        )
    if not sources:
        return typedefs, ""
    return typedefs, "\n".join(["", *sources, "#if defined(__GNUC__)", *checks, "#endif", ""])


def build_cdef(cc: str, include_dirs: list[Path], libs: list[Path]) -> tuple[str, list[str], str]:
    """The cdef text, the names of declared-but-not-exported functions and the C source of their
    pointer types."""
    decls = split_declarations(preprocess(cc, BOUND_HEADERS, include_dirs))
    kept, missing = reduce_for_cffi(decls, exported_symbols(libs))
    typedefs, typedef_source = pointer_typedefs(decls, missing)
    return "\n".join(kept + typedefs) + "\n" + EXTRA_CDEF, missing, typedef_source


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cc", default="cc")
    ap.add_argument("--include", type=Path, action="append", required=True)
    ap.add_argument("--lib", type=Path, action="append", required=True)
    ap.add_argument("--out", type=Path, required=True, help="the C file to write")
    ap.add_argument("--cdef-out", type=Path, help="also write the cdef text here (for inspection)")
    args = ap.parse_args()

    import cffi

    cdef, missing, typedef_source = build_cdef(args.cc, args.include, args.lib)
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    ffi.set_source("pyllama_yield._llama_cffi", EXTRA_SOURCE + typedef_source)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    ffi.emit_c_code(str(args.out))
    if args.cdef_out:
        args.cdef_out.write_text(cdef)
    print(f"gen_cffi_source: {args.out} ({len(missing)} declared functions not exported: {', '.join(missing)})")


if __name__ == "__main__":
    main()
