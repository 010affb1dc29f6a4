#!/usr/bin/env bash
# RPC scale-out demo on loopback: llama.cpp's rpc-server exposes this machine's CPU as a remote
# ggml device, and our server offloads the model's layers to it.
# Needs: the package built with the RPC backend (CMAKE_ARGS="-DGGML_RPC=on" pip install .) and
# rpc-server from scripts/build_llama_server.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
rpc_server=${RPC_SERVER:-build/llama-server/bin/ggml-rpc-server}

if ! "$py" -P -c 'import sys; from pyllama_yield import lib; sys.exit(0 if lib.llama_supports_rpc() else 1)'; then
    echo "the installed pyllama-yield has no RPC backend: CMAKE_ARGS=\"-DGGML_RPC=on\" pip install ." >&2
    exit 2
fi
[ -x "$rpc_server" ] || { echo "no rpc-server at $rpc_server: run scripts/build_llama_server.sh" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'kill $rpc $srv 2>/dev/null || true; rm -rf "$tmp"' EXIT
"$py" -P -c "from pyllama_yield.testing import make_tiny_model; make_tiny_model('$tmp/m.gguf')"
"$rpc_server" --host 127.0.0.1 --port 50052 & rpc=$!
sleep 1
"$py" -m pyllama_yield serve -m "$tmp/m.gguf" --port 18081 --rpc 127.0.0.1:50052 --n-gpu-layers 99 & srv=$!
for _ in $(seq 1 100); do curl -sf localhost:18081/health >/dev/null && break; sleep 0.2; done
curl -s localhost:18081/completion -d '{"prompt": "Once upon a time", "n_predict": 16}'; echo
kill -TERM $srv; wait $srv || true
