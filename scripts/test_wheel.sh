#!/usr/bin/env bash
# Install a built wheel where nothing can be built, and check it as a user would:
#   scripts/test_wheel.sh dist/cpu/pyllama_yield-*.whl
# A fresh venv in build/wheel-test gets the wheel with its server and test extras (WHEEL_EXTRAS,
# e.g. server,test,cuda13 for the CUDA wheel); then, with a
# PATH that has no cc, c++, cmake or nvcc, it runs `info`, `generate`, `serve` (one completion,
# then SIGTERM) and the test suite from a tree that holds the tests and the vendored files they
# read, but no package source: every import is the wheel's.
set -euo pipefail

main() {
    local wheel=${1:?usage: scripts/test_wheel.sh WHEEL}
    cd "$(dirname "$0")/.."
    local root=$PWD/build/wheel-test
    wheel=$(realpath "$wheel")
    rm -rf "$root" && mkdir -p "$root/bin" "$root/tree/vendor/llama.cpp/ggml"
    "${PYTHON:-python3}" -m venv "$root/venv"
    "$root/venv/bin/pip" install -q "$wheel[${WHEEL_EXTRAS:-server,test}]"

    cp -r tests pyproject.toml "$root/tree/"
    cp -r vendor/llama.cpp/include vendor/llama.cpp/models "$root/tree/vendor/llama.cpp/"
    cp -r vendor/llama.cpp/ggml/include "$root/tree/vendor/llama.cpp/ggml/"

    # Every command of the system's bin folders but the build tools.
    local dir tool
    for dir in /usr/local/bin /usr/bin /bin; do
        for tool in "$dir"/*; do
            case "$(basename "$tool")" in
                cc|c++|c89|c99|cpp|gcc*|g++*|*-gcc*|*-g++*|clang*|cmake|ccmake|ctest|cpack|nvcc|ld|ld.*|*-ld|*-ld.*|ninja|make) continue ;;
            esac
            [[ -e $root/bin/$(basename "$tool") ]] || ln -s "$tool" "$root/bin/$(basename "$tool")"
        done
    done
    export PATH="$root/venv/bin:$root/bin"
    for tool in cc c++ gcc cmake nvcc; do
        if command -v "$tool" >/dev/null; then echo "test_wheel: $tool is on PATH" >&2; exit 1; fi
    done

    cd "$root/tree"
    python -c 'import pyllama_yield, sys; assert "site-packages" in pyllama_yield.__file__, pyllama_yield.__file__'
    python -m pyllama_yield info
    python -m pyllama_yield generate -p "Once upon a time" -n 8
    python -m pyllama_yield serve --port 18181 & local server=$!
    local _
    for _ in $(seq 1 300); do
        curl -sf localhost:18181/health >/dev/null && break
        kill -0 "$server" 2>/dev/null || { echo "test_wheel: serve exited early" >&2; exit 1; }
        sleep 0.2
    done
    curl -sf localhost:18181/completion -d '{"prompt": "Once upon a time", "n_predict": 8}'; echo
    # a server that died before its stop fails the run (kill's failure alone would not stop set -e)
    kill -TERM "$server" 2>/dev/null || { echo "test_wheel: serve died before its stop" >&2; exit 1; }
    wait "$server"  # its exit status: a clean exit on SIGTERM is part of the check
    python -m pytest -p no:cacheprovider -q "${@:2}"
}

main "$@"; exit
