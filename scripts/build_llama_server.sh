#!/usr/bin/env bash
# Build llama.cpp's own llama-server, rpc-server, batched-bench and llama-bench from the pinned upstream, for
# side-by-side benchmarks (scripts/bench_serving.py --llama-server, scripts/bench_rpc.py --llama-rpc-server,
# scripts/bench_decode.py --llama-bench).
# vendor/llama.cpp is trimmed to what the package needs, so the whole pinned tree is fetched and
# checked by scripts/vendor_llama_cpp.py --full-tree into build/ (nothing outside the clone).
#   scripts/build_llama_server.sh [--sdist llama_cpp_python-0.3.36.tar.gz]
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
src=build/llama.cpp-full
out=build/llama-server
[ -f "$src/CMakeLists.txt" ] || "$py" scripts/vendor_llama_cpp.py --full-tree "$src" "$@"
# Without ggml's AMX kernels, as the package builds by default (CMakeLists.txt, PYLLAMA_CPU_AMX): in
# a VM that reports AMX without keeping its state, llama-server dies of SIGILL on the first Q4_K or
# Q8_0 matmul, and the two servers then run the same kernels. LLAMA_SERVER_AMX=1 keeps them.
amx_flags=()
[ "${LLAMA_SERVER_AMX:-0}" = 1 ] || amx_flags=(-DCMAKE_C_FLAGS=-U__AMX_INT8__ -DCMAKE_CXX_FLAGS=-U__AMX_INT8__)
cmake -S "$src" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF "${amx_flags[@]}" \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_RPC=ON -DGGML_CCACHE=OFF
cmake --build "$out" --target llama-server ggml-rpc-server llama-batched-bench llama-bench -j "$(nproc)"
ls -l "$out/bin/llama-server" "$out/bin/"*rpc-server* "$out/bin/llama-batched-bench" "$out/bin/llama-bench"
