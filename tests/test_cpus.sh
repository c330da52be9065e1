#!/bin/sh
# One binary for any x86-64, and portable C for other CPUs. ddl picks its kernels by CPU at run
# time (AVX-512 kernels, AVX2 and AVX-512 clones of the hot loops, the built-in gemm's AVX2 and SSE
# micro-kernels), and the CPUs that make test runs on have AVX-512, so the other paths would never
# run here. This runs the kernels' tests under qemu-user emulating a CPU without AVX-512 (Haswell:
# AVX2 and FMA) and one without AVX (Nehalem: SSE4.2, the build's x86-64-v2 baseline): each must
# report the kernels of that CPU (ddl_cpu_kernels) and pass, and an instruction the CPU lacks
# anywhere in what they run kills them (SIGILL). The programs: test_gemm (the OpenBLAS build's
# ddl_gemm, and test_gemm linked with gemm.c built without OpenBLAS: the built-in micro-kernels),
# test_maxpool, test_ops' groups without finite differences over large shapes (conv_paths: every
# convolution shape against the naive loops), test_infer (LeNet's forward end to end),
# test_optim and test_winograd's quick shapes (F(2x2,3x3) and F(4x4,3x3) against double). Then the library for aarch64 (WITH_BLAS=none, the portable code; built warning-free
# with aarch64-linux-gnu-gcc), the same programs and tests/install/app.c (LeNet trained 4 steps,
# checkpointed and reopened) under qemu-aarch64. About 20 s.
#
# OPENBLAS_CORETYPE names the emulated CPU to OpenBLAS: under qemu's Nehalem (CPUID family 6,
# model 26, no AVX) Debian's OpenBLAS 0.3.21 picks its Haswell kernels and dies in
# sgemv_n_HASWELL; told the core, it runs its Nehalem ones, and this test stays about ddl's code.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
skip() { echo "skipped: $*"; echo "0 passed, 0 failed"; exit 0; }
[ "$(uname -m)" = x86_64 ] || skip "not an x86-64 machine"
command -v qemu-x86_64 > /dev/null || skip "qemu-x86_64 is not installed (apt-get install qemu-user)"
[ -z "$SAN" ] || skip "SAN=$SAN: sanitized programs do not run under qemu-user"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# test_gemm again, its gemm.c built without OpenBLAS: the built-in kernels of WITH_BLAS=none
flags=$(sed 's/ -MMD -MP//; s/ -DDDL_WITH_OPENBLAS//' "$BUILD/flags")
libs=$(PKG_CONFIG_PATH=$BUILD pkg-config --static --libs-only-other --libs-only-l --libs-only-L ddl | sed 's/-lddl//')
# shellcheck disable=SC2086 # flags and libs are lists of words
$flags -c src/core/gemm.c -o "$tmp/gemm_builtin.o" 2> "$tmp/cc.log" &&
    $flags -Itests -o "$tmp/test_gemm_builtin" tests/test_gemm.c "$tmp/gemm_builtin.o" "$BUILD/libddl.a" $libs \
        2>> "$tmp/cc.log"
check "test_gemm with the built-in gemm builds warning-free ($(head -c 300 "$tmp/cc.log"))" \
    "$([ -x "$tmp/test_gemm_builtin" ] && [ ! -s "$tmp/cc.log" ]; echo $?)"
"$tmp/test_gemm_builtin" > "$tmp/native.out" 2>&1
check "test_gemm with the built-in gemm, natively: $(tail -n 1 "$tmp/native.out")" $?
grep -q "gemm: builtin" "$tmp/native.out"; check "that test_gemm runs the built-in gemm" $?

# test_ops' groups that reach the kernels, without finite differences over large shapes
ops_groups="conv_hand conv_paths deconv_small maxpool relu dense dropout softmax_xent dice groupnorm concat"

# run_on CPU: every program under qemu's CPU, one after another; DIR/NAME.out and NAME.rc each
run_on() {
    d=$tmp/$1; mkdir -p "$d"
    for p in "test_gemm:$BUILD/tests/test_gemm" "test_gemm_builtin:$tmp/test_gemm_builtin" \
        "test_maxpool:$BUILD/tests/test_maxpool" "test_infer:$BUILD/tests/test_infer" \
        "test_optim:$BUILD/tests/test_optim" "test_winograd:$BUILD/tests/test_winograd quick" \
        "test_ops:$BUILD/tests/test_ops $ops_groups"; do
        name=${p%%:*}
        # shellcheck disable=SC2086 # the program and its arguments
        OPENBLAS_CORETYPE=$1 timeout 120 qemu-x86_64 -cpu "$1" ${p#*:} > "$d/$name.out" 2>&1
        echo $? > "$d/$name.rc"
    done
}
run_on Haswell & pid=$!
run_on Nehalem
wait $pid

# ---- aarch64: the portable code, built by the cross compiler, run by qemu-aarch64 ----
# at -O1: half the compile time of -O3 (22 s of CPU against 44), and the programs still run in
# seconds under qemu; -O3's code is what the native build tests
if command -v aarch64-linux-gnu-gcc > /dev/null && command -v qemu-aarch64 > /dev/null; then
    A=$tmp/arm64
    progs="test_gemm test_maxpool test_infer test_optim test_winograd test_ops"
    (unset MAKEFLAGS MFLAGS MAKELEVEL # the switches below, not those of a make around us
     make -j2 "$A/libddl.a" $(for p in $progs; do echo "$A/tests/$p"; done) SHARED=0 CC=aarch64-linux-gnu-gcc \
        OPT="-O1 -fno-math-errno" \
        WITH_BLAS=none WITH_ZMQ=0 WITH_MPI=0 WITH_LZ4=0 WITH_ZLIB=0 WITH_PNG=0 WITH_JPEG=0 WITH_SODIUM=0 WITH_SERVE=0 \
        WITH_JANSSON=0 SAN= BUILD="$A" > "$tmp/arm64.log" 2>&1)
    check "aarch64: make libddl.a and the tests ($(tail -n 3 "$tmp/arm64.log"))" $?
    ! grep -E "warning|error|x86" "$tmp/arm64.log"; check "aarch64: no warning, no x86 flag" $?
    [ "$(readelf -h "$A/libddl.a" 2> /dev/null | grep Machine: | sort -u | tr -s ' ')" = " Machine: AArch64" ]
    check "aarch64: every object of libddl.a is AArch64" $?
    aarch64-linux-gnu-gcc -std=c99 -Wall -Wextra -Werror -I. tests/install/app.c "$A/libddl.a" -lm -lpthread -lrt \
        -o "$A/app" 2> "$tmp/app.log"
    check "aarch64: tests/install/app.c links against libddl.a ($(head -c 300 "$tmp/app.log"))" $?
    d=$tmp/aarch64; mkdir -p "$d"
    for p in $progs; do
        args=""; [ "$p" = test_ops ] && args=$ops_groups; [ "$p" = test_winograd ] && args=quick
        # shellcheck disable=SC2086 # the groups
        timeout 120 qemu-aarch64 -L /usr/aarch64-linux-gnu "$A/tests/$p" $args > "$d/$p.out" 2>&1
        echo $? > "$d/$p.rc"
    done
    out=$(timeout 120 qemu-aarch64 -L /usr/aarch64-linux-gnu "$A/app" "$tmp/app.ckpt" 2>&1)
    case "$out" in
        "ddl "*" gemm=builtin mpi=no lz4=0 same=1 loss="*) ok ;;
        *) bad "aarch64: app.c printed '$out'" ;;
    esac
else
    bad "aarch64-linux-gnu-gcc or qemu-aarch64 is missing (make test installs gcc-aarch64-linux-gnu and qemu-user)"
fi

# expect CPU KERNELS: what the runs on CPU printed
expect() {
    d=$tmp/$1
    for f in "$d"/*.out; do
        name=$(basename "$f" .out) rc=$(cat "$d/$name.rc")
        last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$f" | tail -n 1)
        case "$last" in
            [1-9]*" passed, 0 failed") check "$name on an emulated $1" "$rc" ;;
            *) bad "$name on an emulated $1: exit $rc, '$last'"
               grep -v "TCG doesn't support requested feature" "$f" | tail -n 5 ;;
        esac
    done
    for g in test_gemm test_gemm_builtin; do
        [ -f "$d/$g.out" ] || continue
        grep -q "^  kernels: $2," "$d/$g.out"
        check "$g on an emulated $1 runs the $2 kernels ($(sed -n 's/^  kernels: \([^,]*\).*/\1/p' "$d/$g.out"))" $?
    done
    grep -q "AVX-512 kernels: not on this CPU" "$d/test_gemm.out"; check "no AVX-512 gemm on an emulated $1" $?
}
expect Haswell avx2
expect Nehalem x86-64-v2
[ -d "$tmp/aarch64" ] && expect aarch64 portable
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
