#!/bin/sh
# Install the Debian packages ddl needs, if any is missing. Used by `make run` (DDL_DEPS=run:
# only what building and training need, so a machine without the npm registry can train),
# `make test` (everything below) and `make bench`. As root it runs apt-get; otherwise through sudo; otherwise it prints the
# exact command and fails. Then, for tests/test_onnx.sh, onnxruntime-node from npm into
# tests/onnx/node_modules (as the user who runs make; --ignore-scripts: the package's install
# script would fetch optional GPU parts, the CPU library is inside the package); and for
# tests/test_serve_browser.sh, playwright-core into tests/serve/node_modules (it drives Debian's
# chromium; playwright-core downloads no browser). ddl-serve needs libmicrohttpd-dev and
# libjansson-dev and libyajl-dev; its tests curl, chromium; make bench wrk; tests/test_cpus.sh
# qemu-user and the aarch64 cross compiler; tests/test_clang.sh clang (make clang-check); tests/test_numpy python3-numpy (it writes the arrays),
# test_images python3-pil, test_onnx_import.sh python3-onnx (it writes ONNX files without PyTorch), test_slurm_real.sh slurmctld, slurmd, slurm-client and munge;
# tests/test_pg.sh postgresql-15 (the server it starts) and postgresql-server-dev-15 (PGXS, which
# builds the extension in pg/); tests/test_ssh.sh openssh-server and openssh-client (an sshd it
# starts in each network namespace). make bench alone (DDL_BENCH_DEPS=1): PyTorch, time, PL/Python,
# iperf3 (tools/bench/wire.sh: what TCP carries between two namespaces, beside ddl's all-reduce);
# python3-torchvision with them, or for make test where python3-torch is installed already.
# libpq-dev (building): lenet, unet and ddl-train --predict --db score a PostgreSQL table through
# libpq (without it they build with --db left out).
set -u
# building and training: the compiler, the libraries ddl links, the data
RUN_PKGS="gcc libc6-dev make pkg-config libopenblas-dev libzmq3-dev liblz4-dev libopenmpi-dev openmpi-bin zlib1g-dev libsodium-dev libpng-dev libjpeg62-turbo-dev libpq-dev dataset-fashion-mnist procps"
PKGS="$RUN_PKGS g++ clang python3 python3-numpy python3-pil python3-onnx cmake iproute2 bc slurmctld slurmd slurm-client munge libmicrohttpd-dev libjansson-dev libyajl-dev curl chromium wrk postgresql-15 postgresql-server-dev-15 openssh-server openssh-client"
# tests/test_cpus.sh: qemu-user runs the kernels under emulated CPUs without AVX-512 and AVX, and
# the library built for aarch64 by the cross compiler
[ "$(uname -m)" = x86_64 ] && PKGS="$PKGS qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
NODE=1
[ "${DDL_DEPS:-test}" = run ] && PKGS="$RUN_PKGS" NODE=0  # make run: no test tools, no npm
[ "${DDL_BENCH_DEPS:-0}" = 1 ] && PKGS="$PKGS python3 python3-torch python3-numpy time postgresql-plpython3-15 iperf3"
# tests/test_torch_zoo.sh: torchvision's networks (3 MB) where PyTorch is (make test does not install
# PyTorch itself: its tests skip without it), and with make bench's PyTorch
if [ "${DDL_DEPS:-test}" != run ] && { [ "${DDL_BENCH_DEPS:-0}" = 1 ] ||
    dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q "install ok installed"; }; then
    PKGS="$PKGS python3-torchvision"
fi
[ "${DDL_FUZZ_DEPS:-0}" = 1 ] && PKGS="clang" NODE=0  # make fuzz alone (make test installs clang too)
# Node.js and npm: Debian's, unless the machine has a node and npm already (NodeSource's nodejs
# carries npm and conflicts with Debian's npm package).
if [ $NODE = 1 ]; then
    command -v node > /dev/null 2>&1 || PKGS="$PKGS nodejs"
    command -v npm > /dev/null 2>&1 || PKGS="$PKGS npm"
fi

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done

if [ -n "$missing" ]; then
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
fi

# npm_into DIR PACKAGE TEST: PACKAGE (as DIR/package.json pins it) into DIR/node_modules for TEST
npm_into() {
    [ $NODE = 1 ] && [ ! -d "$1/node_modules/$2" ] || return 0
    echo "ddl: installing $2 from npm into $1/node_modules ($3)"
    (cd "$1" && npm install --ignore-scripts --no-audit --no-fund --no-package-lock --loglevel=error > /dev/null) || {
        echo "ddl: npm install failed; try: cd $1 && npm install --ignore-scripts --no-package-lock" >&2
        exit 1; }
}
npm_into "$(dirname "$0")/../tests/onnx" onnxruntime-node tests/test_onnx.sh
npm_into "$(dirname "$0")/../tests/serve" playwright-core tests/test_serve_browser.sh
exit 0
