#!/usr/bin/env bash
# Build one wheel per backend into dist/<backend>/, repaired for manylinux by auditwheel, and record
# the build (commit, compiler, CUDA architectures, time, sizes) in benchmarks/wheel_builds.json.
#   scripts/build_wheels.sh cpu    portable x86_64 CPU wheel: GGML_NATIVE=OFF, GGML_BACKEND_DL=ON
#                                  and GGML_CPU_ALL_VARIANTS=ON (one CPU module per x86 feature
#                                  level; ggml loads the best one the running CPU supports), built
#                                  by zig's clang against glibc GLIBC_FLOOR (default 2.17, i.e.
#                                  manylinux2014) with its libc++ linked in (scripts/zig/)
#   scripts/build_wheels.sh cpu-aarch64   the same for Linux ARM64, cross-built here (one CPU
#                                  module per ARM feature level: dotprod, i8mm, SVE, SME, ...)
#   scripts/build_wheels.sh cuda   the x86_64 CPU modules plus the CUDA backend as a module of its
#                                  own, built by the system's gcc (the host compiler nvcc takes),
#                                  so glibc as this machine's; for CUDA_ARCHS (default
#                                  "75-real;80-real;90": machine code for Turing, Ampere/Ada and
#                                  Hopper, PTX for later GPUs; see README "Wheels"). nvcc comes
#                                  from CUDA_HOME (default /usr/local/cuda), cuBLAS from NVIDIA's
#                                  wheel. A stopped build resumes where it stopped (BUILD_DIR).
# The wheels are abi3 (one wheel for every CPython the package supports). The tools come pinned
# from scripts/wheel-tools*.txt into build/wheel-tools, so the build directory build/wheel-<backend>
# (BUILD_DIR) is reused incrementally. Extra CMake options pass through CMAKE_ARGS.
set -euo pipefail

main() {
    local backend=${1:?usage: scripts/build_wheels.sh cpu|cpu-aarch64|cuda}
    cd "$(dirname "$0")/.."
    local tools=$PWD/build/wheel-tools
    if [[ ! -x $tools/bin/python || scripts/wheel-tools.txt -nt $tools/.installed ]]; then
        "${PYTHON:-python3}" -m venv "$tools"
        "$tools/bin/pip" install -q -r scripts/wheel-tools.txt
        touch "$tools/.installed"
    fi
    local py=$tools/bin/python
    local args=(-C cmake.define.GGML_NATIVE=OFF -C cmake.define.GGML_BACKEND_DL=ON
                -C cmake.define.GGML_CPU_ALL_VARIANTS=ON)
    local record=(--backend "$backend") local_version=""
    case "$backend" in
        cpu|cpu-aarch64)
            local arch=x86_64
            [[ $backend == cpu-aarch64 ]] && arch=aarch64
            export ZIG_TARGET="$arch-linux-gnu.${GLIBC_FLOOR:-2.17}" ZIG_PYTHON=$py
            args+=(-C "cmake.define.CMAKE_TOOLCHAIN_FILE=$PWD/scripts/zig/toolchain.cmake")
            record+=(--compiler "zig $("$py" -m ziglang version) -target $ZIG_TARGET")
            if [[ $arch != "$(uname -m)" ]]; then
                export _PYTHON_HOST_PLATFORM="linux-$arch"  # scikit-build-core's wheel tag
            fi ;;
        cuda)
            local cuda_home=${CUDA_HOME:-/usr/local/cuda} archs=${CUDA_ARCHS:-75-real;80-real;90}
            "$tools/bin/pip" install -q -r scripts/wheel-tools-cuda.txt
            local cublas
            cublas=$("$py" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')
            "$py" scripts/cuda_driver_stub.py --cuda-include "$cuda_home/include" --out build/cuda-stub/libcuda.so
            args+=(-C cmake.define.GGML_CUDA=ON
                   -C "cmake.define.CMAKE_CUDA_ARCHITECTURES=$archs"
                   -C "cmake.define.CMAKE_CUDA_COMPILER=$cuda_home/bin/nvcc"
                   -C "cmake.define.CUDAToolkit_ROOT=$cuda_home"
                   -C "cmake.define.CMAKE_CUDA_FLAGS=-I$cublas/include"
                   -C "cmake.define.CUDA_cublas_LIBRARY=$cublas/lib/libcublas.so.13"
                   -C "cmake.define.CUDA_cublasLt_LIBRARY=$cublas/lib/libcublasLt.so.13"
                   -C "cmake.define.CUDA_cuda_driver_LIBRARY=$PWD/build/cuda-stub/libcuda.so")
            record+=(--nvcc "$cuda_home/bin/nvcc" --cuda-archs "$archs" --compiler "$(cc --version | head -1)")
            # 0.1.0+cu13: its own version, so that it sits beside the CPU wheel in one folder or
            # index and pip's cache never hands out one for the other
            local_version=cu13 ;;
        *) echo "unknown backend '$backend' (expected cpu, cpu-aarch64 or cuda)" >&2; exit 2 ;;
    esac

    local raw="dist/$backend/raw"
    rm -rf "dist/$backend" && mkdir -p "$raw"
    local start
    start=$(date +%s)
    "$py" -m pip wheel . --no-deps --no-build-isolation -w "$raw" \
        -C "build-dir=${BUILD_DIR:-build/wheel-$backend}" "${args[@]}"
    local seconds=$(( $(date +%s) - start ))
    echo "build time: $seconds s"

    # auditwheel bundles what the wheel needs from the build machine (libgomp) and sets the manylinux
    # tag; the NVIDIA libraries stay outside: the driver is the user's, the CUDA runtime and cuBLAS
    # come from the cuda13 extra (NVIDIA's wheels) or a system toolkit.
    PATH="$(dirname "$py"):$PATH" "$py" -m auditwheel repair -w "dist/$backend" "$raw"/*.whl \
        --exclude 'libcuda.so.1' --exclude 'libcudart.so.13' \
        --exclude 'libcublas.so.13' --exclude 'libcublasLt.so.13'
    if [[ -n $local_version ]]; then
        local unpacked
        unpacked=$(mktemp -d)
        "$py" -m wheel unpack "dist/$backend"/*.whl -d "$unpacked"
        rm "dist/$backend"/*.whl
        "$py" -m wheel pack --local-version "$local_version" -d "dist/$backend" "$unpacked"/*
        rm -rf "$unpacked"
    fi
    "$py" -m abi3audit --strict --summary "dist/$backend"/*.whl
    "$py" scripts/record_wheel_build.py "${record[@]}" --seconds "$seconds" --wheel "dist/$backend"/*.whl
    ls -l "dist/$backend"/*.whl
}

main "$@"; exit
