#!/bin/sh
# bootstrap.sh: set up memest on a fresh Debian machine.
#
#   scripts/bootstrap.sh demo   install what is missing, build, run memest on models/resnet18.onnx
#   scripts/bootstrap.sh test   install what is missing, build, run the whole test suite (the
#                               Python module's pytest suite and the install test included),
#                               then again under AddressSanitizer and UBSan
set -eu
cd "$(dirname "$0")/.."

# python3-dev: the Python module; python3-pytest: its tests; python3-venv: the
# wheel test's virtual environment (pip from ensurepip); help2man: memest(1)
PACKAGES="meson ninja-build gcc pkg-config libprotobuf-c-dev protobuf-c-compiler libcjson-dev libonnx-dev
          python3-dev python3-pytest python3-venv help2man"

install_missing() {
    missing=""
    for p in $PACKAGES; do
        dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    echo "bootstrap: installing$missing"
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
}

build() { # build DIR [meson options...]
    dir=$1
    shift
    [ -f "$dir/build.ninja" ] || meson setup "$dir" "$@" >/dev/null
    ninja -C "$dir"
}

case "${1:-}" in
demo)
    install_missing
    build build
    ./build/cli/memest models/resnet18.onnx --batch 32
    ;;
test)
    install_missing
    build build
    meson test -C build --print-errorlogs
    build build-asan -Db_sanitize=address,undefined -Db_lundef=false
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        meson test -C build-asan --print-errorlogs
    ;;
*)
    echo "usage: $0 demo|test" >&2
    exit 2
    ;;
esac
