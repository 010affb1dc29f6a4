#!/usr/bin/env bash
# A built wheel run for real in another Debian userland, as a user there would run it:
#   scripts/test_wheel_debian.sh dist/cpu-aarch64/pyllama_yield-*.whl            # arm64 Debian 12
#   DEBIAN_SUITE=bullseye scripts/test_wheel_debian.sh dist/cpu/pyllama_yield-*.whl   # glibc 2.31
# The userland is made by debootstrap into build/<suite>-<arch>-root the first time (the wheel's
# CPU family; arm64 runs through qemu-user, Debian's qemu-user-static, registered with binfmt_misc).
# Its python3 serves when it is 3.10 or later (bookworm: 3.11); an older one (bullseye: 3.9) is
# replaced by CPython 3.11 built there from Debian's own source package. In a chroot, a fresh venv
# gets the wheel and what its tests import from the package index, then `info`, one generation and
# the binding tests (or the pytest arguments given after the wheel) on a tiny model made there.
# Needs root (debootstrap, chroot, mounts) and Debian's and PyPI's mirrors.
set -euo pipefail

MIRROR=http://deb.debian.org/debian
# CPython for a userland whose own is too old: Debian bookworm's source package of 3.11
CPYTHON_URL=$MIRROR/pool/main/p/python3.11/python3.11_3.11.2.orig.tar.gz
CPYTHON_SHA256=2411c74bda5bbcfcddaf4531f66d1adc73f247f529aee981b029513aefdbf849

register_qemu() {
    # binfmt_misc: the kernel hands arm64 executables to qemu (the F flag: it works in a chroot)
    [[ -e /proc/sys/fs/binfmt_misc/register ]] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
    [[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]] && return
    command -v qemu-aarch64-static >/dev/null || apt-get install -y -q qemu-user-static
    cat /usr/lib/binfmt.d/qemu-aarch64.conf > /proc/sys/fs/binfmt_misc/register
}

make_rootfs() {  # ROOT SUITE ARCH
    [[ -e $1/etc/os-release && ! -e $1/debootstrap ]] && return  # debootstrap finished there
    command -v debootstrap >/dev/null || apt-get install -y -q debootstrap
    local include=python3,python3-venv
    # an old suite's python gets replaced: the tools to build CPython instead
    [[ $2 == bullseye ]] && include=gcc,make,libc6-dev,libssl-dev,zlib1g-dev,libffi-dev,libsqlite3-dev,libbz2-dev,liblzma-dev,ca-certificates,curl,xz-utils
    debootstrap --arch="$3" --variant=minbase --include="$include" "$2" "$1" "$MIRROR"
}

in_root() {  # ROOT SCRIPT ARGS...: bash in the chroot, with /proc, /dev, /sys and the network
    local root=$1
    shift
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    # this machine's CA bundle, so that a TLS-intercepting proxy's CA (if any) is trusted there too
    mkdir -p "$root/opt" && cp "${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}" "$root/opt/host-ca.crt"
    for fs in proc dev sys; do mountpoint -q "$root/$fs" || mount --bind "/$fs" "$root/$fs"; done
    local status=0
    # a clean environment: nothing of this machine's (pip's indexes, caches) leaks in
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 PIP_DISABLE_PIP_VERSION_CHECK=1 \
        PIP_CERT=/opt/host-ca.crt SSL_CERT_FILE=/opt/host-ca.crt REQUESTS_CA_BUNDLE=/opt/host-ca.crt \
        "$(command -v chroot)" "$root" /bin/bash -euo pipefail -c "$@" || status=$?
    for fs in proc dev sys; do umount -l "$root/$fs" 2>/dev/null || true; done
    return "$status"
}

python_in_root() {  # ROOT: a Python >= 3.10 there (its own, else CPython built from source)
    local root=$1
    if [[ -x $root/usr/bin/python3 ]] && chroot "$root" /usr/bin/python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
        echo /usr/bin/python3
        return
    fi
    if [[ ! -x $root/opt/python/bin/python3 ]]; then
        echo "building CPython 3.11 in $root (its own python3 is older than 3.10)" >&2
        in_root "$root" "
            mkdir -p /opt/src && cd /opt/src
            curl -sfL -o cpython.tar.gz $CPYTHON_URL
            echo '$CPYTHON_SHA256  cpython.tar.gz' | sha256sum -c - >&2
            tar xzf cpython.tar.gz && cd Python-3.11.2
            ./configure --prefix=/opt/python --with-ensurepip=install >/dev/null
            make -j$(nproc) >/dev/null 2>&1 && make install >/dev/null 2>&1" >&2
    fi
    echo /opt/python/bin/python3
}

main() {
    local wheel=${1:?usage: scripts/test_wheel_debian.sh WHEEL [PYTEST ARGS]}
    cd "$(dirname "$0")/.."
    local arch=amd64 suite=${DEBIAN_SUITE:-bookworm}
    [[ $wheel == *aarch64.whl ]] && arch=arm64
    [[ $arch == arm64 ]] && register_qemu
    local root=build/$suite-$arch-root
    make_rootfs "$root" "$suite" "$arch"
    local python
    python=$(python_in_root "$root")
    local work=$root/opt/wheel-test
    rm -rf "$work" && mkdir -p "$work/tree/vendor/llama.cpp/ggml"
    cp "$wheel" "$work/"
    cp -r tests pyproject.toml "$work/tree/"
    cp -r vendor/llama.cpp/include vendor/llama.cpp/models "$work/tree/vendor/llama.cpp/"
    cp -r vendor/llama.cpp/ggml/include "$work/tree/vendor/llama.cpp/ggml/"
    local tests=("${@:2}")
    [[ ${#tests[@]} -gt 0 ]] || tests=(tests/test_binding.py)
    local log=$work.log
    in_root "$root" '
        cd /opt/wheel-test
        echo "userland: $(uname -m) | $(. /etc/os-release; echo "$PRETTY_NAME") | glibc $(ldd --version | head -1 | grep -o "[0-9.]*$") | $('"$python"' --version)"
        '"$python"' -m venv venv
        # what the binding tests import (the whole test extra would pull in browsers and servers)
        venv/bin/pip install -q "$(ls pyllama_yield-*.whl)" pytest pytest-timeout gguf
        cd tree
        ../venv/bin/python -m pyllama_yield info
        ../venv/bin/python -m pyllama_yield generate -p "Once upon a time" -n 8
        ../venv/bin/python -m pytest -p no:cacheprovider -q -o addopts= -m "not realmodel and not fuzz" "$@"
    ' bash "${tests[@]}" 2>&1 | tee "$log"
    # what ran where, for the README (benchmarks/wheel_checks.json); only a run that passed gets here
    python3 scripts/record_wheel_check.py --wheel "$wheel" --log "$log" --tests "${tests[*]}"
}

main "$@"; exit
