#!/bin/sh
# make install into a temporary DESTDIR, then tests/install/app.c built against the installed copy
# and run: through pkg-config (libddl.so; libddl.a with --static where SHARED=0 installed no
# libddl.so) and through CMake's find_package (ddl::ddl, shared and with DDL_STATIC). The soname and its links; ddl.pc naming
# MPI's link flags exactly when the build used MPI (a build with WITH_MPI=0 and WITH_BLAS=none, the
# built-in gemm, is installed beside it with make install-lib, the library alone, and trains);
# every example copied alone (with common/, the programs' kit) into an empty directory and built with pkg-config's flags;
# make uninstall leaving nothing. (The aarch64 build: tests/test_cpus.sh.) About 20 s.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
unset MAKEFLAGS MFLAGS MAKELEVEL # make install takes $BUILD's switches, not those of a make around us
san=${SAN:+-fsanitize=$SAN}
has() { grep -q -- "-DDDL_WITH_$1" "$BUILD/flags"; }
yes_no() { if has "$1"; then echo "$2"; else echo "$3"; fi; }
v() { sed -n "s/^#define DDL_VERSION_$1 *\([0-9]*\).*/\1/p" ddl.h; }
version=$(v MAJOR).$(v MINOR).$(v PATCH)
abi=$(v MAJOR); [ "$abi" = 0 ] && abi="0.$(v MINOR)" # while the major is 0, a minor may change the ABI
# pc PREFIX ARGS: pkg-config on the ddl.pc installed under PREFIX
pc() { p=$1; shift; PKG_CONFIG_PATH=$p/lib/pkgconfig pkg-config --define-variable=prefix="$p" "$@"; }
# expect NAME PROGRAM MPI [GEMM]: PROGRAM runs and prints the line of this build (or of GEMM)
expect() {
    want="ddl $version gemm=${4:-$(yes_no OPENBLAS openblas builtin)} mpi=$3 lz4=$(yes_no LZ4 1 0) same=1"
    got=$("$2" "$tmp/app.ckpt" 2>&1)
    case "$got" in "$want "*) ok ;; *) bad "$1: printed '$got', expected '$want ...'" ;; esac
}
# needs_libddl FILE: FILE has libddl.so.MAJOR in its NEEDED entries
needs_libddl() { readelf -d "$1" | grep -q "NEEDED.*\[libddl\.so\.$abi\]"; }

# ---- make install ----
[ -f "$BUILD/flags" ] || { echo "no $BUILD/flags: run make first"; echo "0 passed, 1 failed"; exit 1; }
cp "$BUILD/flags" "$tmp/flags.before"
make -s -j2 install BUILD="$BUILD" DESTDIR="$tmp/root" PREFIX=/usr/local > "$tmp/install.log" 2>&1
check "make install" $?
cmp -s "$BUILD/flags" "$tmp/flags.before"; check "make install kept the build's switches" $?
P=$tmp/root/usr/local
missing=""
for f in include/ddl.h lib/libddl.a lib/libddl.so.$version lib/pkgconfig/ddl.pc lib/cmake/ddl/ddlConfig.cmake \
    lib/cmake/ddl/ddlConfigVersion.cmake bin/lenet bin/unet bin/ddlrun bin/ddl-bench bin/ddl-ckpt; do
    [ -f "$P/$f" ] || missing="$missing $f"
done
[ -z "$missing" ]; check "installed:$missing missing" $?
[ "$(readlink "$P/lib/libddl.so.$abi")" = "libddl.so.$version" ] && [ "$(readlink "$P/lib/libddl.so")" = "libddl.so.$abi" ]
check "libddl.so -> libddl.so.$abi -> libddl.so.$version" $?
readelf -d "$P/lib/libddl.so.$version" | grep -q "SONAME.*\[libddl\.so\.$abi\]"; check "soname libddl.so.$abi" $?

# ---- pkg-config ----
[ "$(pc "$P" --modversion ddl)" = "$version" ]; check "ddl.pc version $version" $?
static_libs=$(pc "$P" --static --libs ddl)
if has MPI; then
    missing=""
    for w in $(mpicc --showme:link); do case " $static_libs " in *" $w "*) ;; *) missing="$missing $w" ;; esac; done
    [ -z "$missing" ]; check "pkg-config --static names MPI's link flags (missing:$missing)" $?
fi
cc $san -std=c99 -Wall -Wextra -Werror tests/install/app.c -o "$tmp/app-shared" $(pc "$P" --cflags --libs ddl) 2> "$tmp/cc.log"
check "cc app.c \$(pkg-config --cflags --libs ddl)" $?
needs_libddl "$tmp/app-shared"; check "linked against libddl.so" $?
LD_LIBRARY_PATH=$P/lib expect "pkg-config, shared" "$tmp/app-shared" "$(yes_no MPI yes no)"
S=$tmp/static/usr/local # SHARED=0: libddl.a only, so -lddl links it
make -s install SHARED=0 BUILD="$BUILD" DESTDIR="$tmp/static" > /dev/null 2>&1 && [ ! -e "$S/lib/libddl.so" ]
check "make install SHARED=0: no libddl.so" $?
cc $san -std=c99 tests/install/app.c -o "$tmp/app-static" $(pc "$S" --cflags --static --libs ddl) 2>> "$tmp/cc.log"
check "cc app.c \$(pkg-config --static --cflags --libs ddl)" $?
! needs_libddl "$tmp/app-static"; check "--static: libddl.a linked in" $?
expect "pkg-config, static" "$tmp/app-static" "$(yes_no MPI yes no)"
# without Libs.private libddl.a's dependencies are missing: the check above can fail
cc $san -std=c99 tests/install/app.c -o "$tmp/app-none" $(pc "$S" --cflags --libs ddl) > "$tmp/none.log" 2>&1
[ $? -ne 0 ] && grep -q "undefined reference" "$tmp/none.log"; check "libddl.a without --static does not link" $?

# ---- the examples as a user copies them: each example's .c and the folder common/ into
# an empty directory, built with the installed ddl.pc alone (no -I into this tree, no -lm, -lz) ----
for src in examples/*.c; do
    name=$(basename "$src" .c); d=$tmp/copy-$name
    mkdir "$d" && cp "$src" "$d"/ && cp -R common "$d"/
    (cd "$d" && cc $san -Wall -Wextra -Werror "$name.c" -o "$name" $(pc "$P" --cflags --libs ddl)) > "$tmp/copy-$name.log" 2>&1
    check "copied $name.c: cc $name.c \$(pkg-config --cflags --libs ddl): $(head -n 3 "$tmp/copy-$name.log")" $?
    [ "$name" = quickstart ] && continue # README's program takes no flags: built is the check (test_readme runs it)
    out=$(LD_LIBRARY_PATH=$P/lib "$d/$name" --version 2>&1)
    [ "$out" = "$name (ddl) $version" ]; check "copied $name --version: '$out'" $?
done

# ---- CMake ----
cmake_app() { # NAME PREFIX CMAKE-ARGS...
    name=$1; p=$2; shift 2
    cmake -S tests/install -B "$tmp/cm-$name" -DCMAKE_PREFIX_PATH="$p" -DDDL_WANT="$(v MAJOR).$(v MINOR)" \
        ${san:+-DCMAKE_C_FLAGS=$san} "$@" > "$tmp/cm-$name.log" 2>&1 &&
        cmake --build "$tmp/cm-$name" >> "$tmp/cm-$name.log" 2>&1 || { tail -n 15 "$tmp/cm-$name.log"; return 1; }
}
cmake_app shared "$P"; check "cmake find_package(ddl), ddl::ddl" $?
needs_libddl "$tmp/cm-shared/app"; check "cmake: linked against libddl.so" $?
LD_LIBRARY_PATH=$P/lib expect "cmake, shared" "$tmp/cm-shared/app" "$(yes_no MPI yes no)"
cmake_app static "$P" -DDDL_STATIC=ON; check "cmake find_package(ddl), DDL_STATIC=ON" $?
if [ "$(v MAJOR)" = 0 ] && [ "$(v MINOR)" -gt 0 ]; then # 0.Y: a program written for 0.(Y-1) has another ABI
    old="0.$(( $(v MINOR) - 1 ))"
    ! cmake -S tests/install -B "$tmp/cm-old" -DCMAKE_PREFIX_PATH="$P" -DDDL_WANT="$old" > "$tmp/cm-old.log" 2>&1 &&
        grep -q "$version" "$tmp/cm-old.log"
    check "cmake find_package(ddl $old) refuses ddl $version (another ABI while the major is 0)" $?
fi
! needs_libddl "$tmp/cm-static/app"; check "cmake DDL_STATIC: libddl.a linked in" $?
expect "cmake, static" "$tmp/cm-static/app" "$(yes_no MPI yes no)"

# ---- a build without MPI and OpenBLAS: nothing of either in ddl.pc or the CMake package, it links
# and trains on the built-in gemm. At -O1: this is about packaging, and a third compile of the whole
# library at -O3 was 50 s of make test's CPU (the kernels at -O3 without OpenBLAS: test_cpus.sh) ----
N=$tmp/nompi/usr/local
make -s -j2 install-lib BUILD="$tmp/b0" WITH_MPI=0 WITH_BLAS=none WITH_SERVE=0 SHARED=0 OPT=-O1 DESTDIR="$tmp/nompi" \
    > "$tmp/nompi.log" 2>&1 && [ -f "$N/include/ddl.h" ] && [ -f "$N/lib/libddl.a" ] && [ ! -d "$N/bin" ]
check "make install-lib WITH_MPI=0 WITH_BLAS=none SHARED=0: the library alone" $?
! grep -qi mpi "$N/lib/pkgconfig/ddl.pc" "$N/lib/cmake/ddl/ddlConfig.cmake"; check "WITH_MPI=0: no MPI in ddl.pc and ddlConfig.cmake" $?
! grep -qi openblas "$N/lib/pkgconfig/ddl.pc" "$N/lib/cmake/ddl/ddlConfig.cmake"
check "WITH_BLAS=none: no OpenBLAS in ddl.pc and ddlConfig.cmake" $?
cc $san -std=c99 tests/install/app.c -o "$tmp/app-nompi" $(pc "$N" --cflags --static --libs ddl) 2>> "$tmp/cc.log"
check "WITH_MPI=0: cc app.c \$(pkg-config --static ...)" $?
expect "WITH_MPI=0 WITH_BLAS=none, static" "$tmp/app-nompi" no builtin
cmake_app nompi "$N"; check "WITH_MPI=0 SHARED=0: cmake, ddl::ddl is the static library" $?
! needs_libddl "$tmp/cm-nompi/app"; check "WITH_MPI=0 SHARED=0: cmake linked libddl.a" $?
expect "WITH_MPI=0 WITH_BLAS=none, cmake static" "$tmp/cm-nompi/app" no builtin
[ -s "$tmp/cc.log" ] && { echo "compiler said:"; head -n 20 "$tmp/cc.log"; }

# ---- make uninstall ----
make -s uninstall BUILD="$BUILD" DESTDIR="$tmp/root" > /dev/null 2>&1; check "make uninstall" $?
left=$(find "$tmp/root" ! -type d | sed "s|^$tmp/root||")
[ -z "$left" ]; check "make uninstall left $left" $?

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
