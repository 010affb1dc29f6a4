# Build with zig's clang for the target in ZIG_TARGET (scripts/build_wheels.sh sets it and
# ZIG_PYTHON): binaries that need no newer glibc than the target names, with zig's libc++ linked
# into each library (no libstdc++ needed at run time), for this machine's CPU family or another.
set(PYLLAMA_ZIG_TARGET "$ENV{ZIG_TARGET}")
if(NOT PYLLAMA_ZIG_TARGET)
    message(FATAL_ERROR "scripts/zig/toolchain.cmake: set ZIG_TARGET (e.g. x86_64-linux-gnu.2.17)")
endif()
string(REGEX MATCH "^[^-]+" _zig_arch "${PYLLAMA_ZIG_TARGET}")
if(NOT _zig_arch STREQUAL CMAKE_HOST_SYSTEM_PROCESSOR)  # a cross build: ggml picks its CPU code by this
    set(CMAKE_SYSTEM_NAME Linux)
    set(CMAKE_SYSTEM_PROCESSOR "${_zig_arch}")
endif()
set(CMAKE_C_COMPILER "${CMAKE_CURRENT_LIST_DIR}/cc")
set(CMAKE_CXX_COMPILER "${CMAKE_CURRENT_LIST_DIR}/c++")
set(CMAKE_AR "${CMAKE_CURRENT_LIST_DIR}/ar" CACHE FILEPATH "")
set(CMAKE_RANLIB "${CMAKE_CURRENT_LIST_DIR}/ranlib" CACHE FILEPATH "")
# zig exports the static C++ runtime from every library it links: keep each library's copy private
set(_hide "-Wl,--version-script=${CMAKE_CURRENT_LIST_DIR}/hide-cxx-runtime.map")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_hide}")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "${_hide}")
# zig ships no OpenMP runtime: ggml uses its own thread pool
set(GGML_OPENMP OFF CACHE BOOL "zig ships no OpenMP runtime")
