#!/usr/bin/env bash
# The CUDA wheel on a real GPU, for the day one is lent (the device tool's machines: no network,
# Python 3.12 with NVIDIA's CUDA 13 runtime and cuBLAS wheels, nvcc, gcc; no cffi or pydantic).
#
#   scripts/gpu_check.sh prepare   here: the CUDA wheel (dist/cuda), the wheels of its dependencies
#                                  that the GPU machine lacks (for CPython 3.12) and llama.cpp's own
#                                  llama-bench of the same pin, built against a GGML_BACKEND_DL ggml
#                                  so that it loads the wheel's CUDA module; packed with xz and cut
#                                  into 30 MiB parts, build/gpu-check/part-aa, -ab, ...: a call of
#                                  the device tool carries 64 MiB with the working tree (~26 MiB),
#                                  so each part goes with a call of its own, and a warm machine
#                                  keeps the earlier ones:
#                                    run("true", carry=["build/gpu-check/part-aa"])
#                                    run("scripts/gpu_check.sh run", carry=["build/gpu-check/part-ab"])
#   scripts/gpu_check.sh run       there, in the repo root, with every part there: unpacks, installs
#                                  the wheel, writes $OUT/info.json (the CUDA device must be listed),
#                                  runs the tests with every layer offloaded, then bench_decode with
#                                  layers offloaded beside the same loop in C and llama-bench, and
#                                  writes $OUT/gpu_check.json; then the same model on the CPU
#                                  ($OUT/cpu_check.json). Exits non-zero when CUDA is not used, when
#                                  a model the tests or the benchmark load keeps a layer on the CPU
#                                  (tests/conftest.py, scripts/gpu_check_verdict.py), or when the
#                                  GPU decodes no faster than the CPU.
# GPU_CHECK_NGL (default 99) is the layers asked for: GPU_CHECK_NGL=0 must fail the check on a GPU.
# Commit the result as benchmarks/gpu_check.json (with the machine it ran on).
# A dry run on a machine without a GPU: GPU_PYTHON=3.11 (this machine's Python) for prepare, and
# GPU_CHECK_DRY_RUN=1 for run, which then goes on past "CUDA is not used" on the CPU and reports
# (without failing) what would fail on a GPU; GPU_CHECK_MODEL="--n-embd 256 --n-layer 4" and
# GPU_CHECK_GPU_RUN="--rounds 2" keep its benchmark small there.
set -euo pipefail

prepare() {
    local dest=build/gpu-check-stage
    rm -rf "$dest" build/gpu-check && mkdir -p "$dest/wheels" build/gpu-check
    # the wheel re-zipped without compression, so that xz below packs its contents, not deflate's
    python3 - dist/cuda/*.whl "$dest/wheels" <<'PY'
import sys, zipfile, pathlib
src, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest / src.name, "w", zipfile.ZIP_STORED) as zout:
    for info in zin.infolist():
        zout.writestr(info, zin.read(info), compress_type=zipfile.ZIP_STORED)
PY
    # What the wheel and the tests import that the GPU machine's image lacks (device/KINDS.md): openai
    # and what it needs beyond the image (httpx2, ...) for test_embeddings.py, whose missing import
    # stopped the tier at collection in the CPU dry run.
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version "${GPU_PYTHON:-3.12}" --implementation cp \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
        -d "$dest/wheels" cffi pycparser pydantic pydantic-core pydantic-settings annotated-types \
        typing-inspection python-dotenv starlette uvicorn gguf openai httpx2 httpcore2 truststore distro jiter sniffio
    # llama-bench of the pinned tree, with no backend compiled in: it loads the wheel's modules.
    [ -f build/llama.cpp-full/CMakeLists.txt ] || python3 scripts/vendor_llama_cpp.py --full-tree build/llama.cpp-full
    cmake -S build/llama.cpp-full -B build/llama-bench-dl -DCMAKE_BUILD_TYPE=Release \
        -DGGML_BACKEND_DL=ON -DGGML_CPU=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF -DGGML_CCACHE=OFF \
        -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON -DCMAKE_INSTALL_RPATH='$ORIGIN'
    cmake --build build/llama-bench-dl --target llama-bench -j "$(nproc)"
    mkdir -p "$dest/llama-bench"
    cp -L build/llama-bench-dl/bin/llama-bench build/llama-bench-dl/bin/lib*.so* "$dest/llama-bench/"
    tar -C "$dest" -cf - . | xz -6 -T0 | split -b 30M - build/gpu-check/part-
    ls -l build/gpu-check
}

run() {
    local site=/tmp/gpu-check-site out=${OUT:-build/gpu-check-out} stage=build/gpu-check-stage
    mkdir -p "$out"
    rm -rf "$stage" && mkdir -p "$stage" && cat build/gpu-check/part-* | xz -d | tar -C "$stage" -xf -
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$stage"/wheels/*.whl
    export PYTHONPATH=$site PYTHONUNBUFFERED=1
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/nvidia-smi.csv"
    fi
    python3 -m pyllama_yield info
    python3 -m pyllama_yield info --json > "$out/info.json"
    python3 - "$out/info.json" <<'PY'
import json, os, sys
info = json.load(open(sys.argv[1]))
cuda = [b for b in info["backends"] if b["name"] == "CUDA" and b["devices"]]
if not cuda:
    why = f"CUDA is not used: {info['backend_modules']}"
    if os.environ.get("GPU_CHECK_DRY_RUN") != "1":
        sys.exit(why)
    print(why, "(dry run: going on)")
else:
    print("CUDA devices:", [d["description"] for d in cuda[0]["devices"]])
PY
    # the suite's C-backed tests whose imports the image has, every model offloaded: a model that
    # keeps a layer on the CPU fails its test (tests/conftest.py); the verdict comes at the end
    local ngl=${GPU_CHECK_NGL:-99} tests_exit=0
    PYLLAMA_TEST_GPU_LAYERS=$ngl python3 -m pytest -p no:cacheprovider -q -o addopts="" -m "not realmodel and not fuzz" \
        tests/test_backend_loader.py tests/test_llama.py tests/test_engine.py tests/test_binding.py \
        tests/test_embeddings.py tests/test_checkpoints.py > "$out/pytest.log" 2>&1 || tests_exit=$?
    tail -n 30 "$out/pytest.log"
    # llama-bench finds the backend modules in its working directory: the installed package's
    local pkg
    pkg=$(python3 -c 'import pyllama_yield._native as n; print(n.PACKAGE_DIR)')
    cat > "$out/llama-bench" <<EOF
#!/bin/sh
cd "$pkg" && exec "$PWD/$stage/llama-bench/llama-bench" "\$@"
EOF
    chmod +x "$out/llama-bench"
    # a ~1.1B-parameter f16 model of random weights (made there): big enough for the GPU to matter
    local model=${GPU_CHECK_MODEL:---n-embd 2048 --n-layer 16 --n-head 16 --dtype f16}
    local gpu_run=${GPU_CHECK_GPU_RUN:---n-prompt 512 --n-gen 128 --rounds 5}
    # the same model with every layer on the CPU, on all its cores: a short prompt and few tokens,
    # so that it takes seconds; the offloaded decode must be the faster one
    local cpu_run=${GPU_CHECK_CPU_RUN:---n-prompt 32 --n-gen 16 --rounds 1}
    # shellcheck disable=SC2086 # the sizes are words
    python3 scripts/bench_decode.py --n-gpu-layers "$ngl" $model $gpu_run --threads 4 --llama-bench "$out/llama-bench" \
        --out "$out/gpu_check.json"
    # shellcheck disable=SC2086
    python3 scripts/bench_decode.py --n-gpu-layers 0 $model $cpu_run --threads "$(nproc)" --out "$out/cpu_check.json"
    python3 scripts/gpu_check_verdict.py "$out/gpu_check.json" "$out/cpu_check.json" --tests-exit "$tests_exit" \
        | tee "$out/verdict.txt"
}

cd "$(dirname "$0")/.."
case "${1:-}" in
    prepare) prepare ;;
    run) run ;;
    *) echo "usage: scripts/gpu_check.sh prepare|run" >&2; exit 2 ;;
esac
