#!/bin/sh
# Install the Debian packages ddl needs, if any is missing. Used by `make run`, `make test`
# and `make bench`. As root it runs apt-get; otherwise through sudo; otherwise it prints the
# exact command and fails.
set -u
PKGS="gcc g++ libc6-dev make pkg-config cmake libopenblas-dev libzmq3-dev liblz4-dev libopenmpi-dev openmpi-bin zlib1g-dev libpng-dev dataset-fashion-mnist iproute2 procps bc"
[ "${DDL_BENCH_DEPS:-0}" = 1 ] && PKGS="$PKGS python3 python3-torch python3-numpy"
[ "${DDL_FUZZ_DEPS:-0}" = 1 ] && PKGS="clang"   # make fuzz only: make test never needs clang

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "ddl: installing missing Debian packages:$missing"
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo"
else
    echo "ddl: cannot install as $(id -un); run as root:" >&2
    echo "    apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null || { echo "ddl: apt-get update failed" >&2; exit 1; }
$SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null || {
    echo "ddl: apt-get install failed; try: apt-get install -y$missing" >&2; exit 1; }
