"""The compiled binding against the vendored llama.h: completeness, layouts, backends, logs, vocab."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pyllama_yield import backends, ffi, lib, system_info

LLAMA_DIR = Path(__file__).resolve().parents[1] / "vendor" / "llama.cpp"

HEADER = LLAMA_DIR / "include" / "llama.h"
# LLAMA_API functions deliberately not bound (none today; deprecated ones are bound too).
NOT_BOUND: set[str] = set()


def llama_api_functions() -> set[str]:
    """Parse llama.h on its own (not with the generator): every function declared LLAMA_API."""
    text = HEADER.read_text()
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"^\s*#[^\n]*", "", text, flags=re.M)  # the LLAMA_API/DEPRECATED macros themselves
    text = text.replace("DEPRECATED(", "")
    return set(re.findall(r"LLAMA_API\s+[^;(]*?\b(\w+)\s*\(", text))


def test_every_llama_api_function_is_an_attribute_of_lib():
    declared = llama_api_functions()
    assert len(declared) == 255  # what the pinned header declares (31 of them deprecated)
    missing = sorted(n for n in declared - NOT_BOUND if not hasattr(lib, n))
    assert missing == []


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_struct_sizes_match_the_c_compiler(tmp_path: Path):
    structs = [
        "llama_model_params",
        "llama_context_params",
        "llama_batch",
        "llama_sampler_chain_params",
        "llama_token_data",
        "llama_chat_message",
    ]
    src = tmp_path / "sizes.c"
    src.write_text(
        '#include <stdio.h>\n#include "llama.h"\nint main(void) {\n'
        + "".join(f'    printf("{s} %zu\\n", sizeof(struct {s}));\n' for s in structs)
        + "    return 0;\n}\n"
    )
    exe = tmp_path / "sizes"
    subprocess.run(
        ["cc", "-I", LLAMA_DIR / "include", "-I", LLAMA_DIR / "ggml" / "include", src, "-o", exe], check=True
    )
    c_sizes = dict(
        line.split() for line in subprocess.run([exe], check=True, capture_output=True, text=True).stdout.splitlines()
    )
    for s in structs:
        assert ffi.sizeof(f"struct {s}") == int(c_sizes[s]), s


def test_backends_list_cpu_and_system_info():
    regs = backends()
    assert any(b.name == "CPU" and any(d.type == "cpu" for d in b.devices) for b in regs)
    assert "CPU" in system_info()


def test_cli_info_json(tmp_path: Path):
    out = subprocess.run(
        [sys.executable, "-m", "pyllama_yield", "info", "--json"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    ).stdout
    info = json.loads(out)
    assert info["build"]["llama_cpp_commit"] == "0c1e57098"
    assert any(b["name"] == "CPU" for b in info["backends"])


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_llama_cpp_logs_reach_logging():
    logger = logging.getLogger("pyllama_yield.llama_cpp")
    handler = _Collect()
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        params = lib.llama_model_default_params()
        params.vocab_only = True
        model = lib.llama_model_load_from_file(str(LLAMA_DIR / "models" / "ggml-vocab-llama-spm.gguf").encode(), params)
        assert model != ffi.NULL
        lib.llama_model_free(model)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    messages = [r.getMessage() for r in handler.records]
    assert any("llama_model_loader" in m for m in messages), messages[:5]
    assert all("\n" not in m for m in messages)  # whole lines, continuation pieces joined


def _vocab_cases(name: str) -> list[tuple[str, list[int]]]:
    base = LLAMA_DIR / "models" / f"ggml-vocab-{name}.gguf"
    texts = base.with_suffix(".gguf.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    outs = base.with_suffix(".gguf.out").read_text(encoding="utf-8").split("\n")
    return [(t, [int(x) for x in o.split()]) for t, o in zip(texts, outs, strict=False)]


@pytest.mark.parametrize("name", ["llama-spm", "gpt-2"])
def test_tokenizer_matches_llama_cpp_test_vectors(name: str):
    params = lib.llama_model_default_params()
    params.vocab_only = True
    model = lib.llama_model_load_from_file(str(LLAMA_DIR / "models" / f"ggml-vocab-{name}.gguf").encode(), params)
    assert model != ffi.NULL
    try:
        vocab = lib.llama_model_get_vocab(model)
        cases = _vocab_cases(name)
        assert len(cases) >= 40
        for text, expected in cases:
            data = text.encode("utf-8")
            buf = ffi.new("llama_token[]", len(data) + 8)
            n = lib.llama_tokenize(vocab, data, len(data), buf, len(data) + 8, False, False)
            assert list(ffi.unpack(buf, n)) == expected, text
            # and back: detokenize gives the text again
            out = ffi.new("char[]", 4 * len(data) + 16)
            m = lib.llama_detokenize(vocab, buf, n, out, 4 * len(data) + 16, False, False)
            back = ffi.unpack(out, m).decode("utf-8", "replace")
            # gpt-2 cleans up spaces around punctuation when detokenizing; compare the rest
            assert re.sub(r"\s", "", back) == re.sub(r"\s", "", text)
    finally:
        lib.llama_model_free(model)
