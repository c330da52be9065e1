#!/bin/sh
# test_build_pg.sh - where make builds the PostgreSQL extension, and what make run builds.
# postgresql-client-NN ships PGXS's pgxs.mk without the server headers: make must then skip the
# extension in one line naming the package that brings them (postgresql-server-dev-NN), and build
# the rest; with the headers it builds the extension. make run builds what it runs (libddl.a,
# lenet, ddlrun): no test program, no shared library (libddl.a's objects, never linked -shared).
# All with make -n against stand-ins for pg_config, so nothing is built or installed.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
unset MAKEFLAGS MFLAGS MAKELEVEL
mkdir -p "$tmp/pgxs" "$tmp/server"
: > "$tmp/pgxs/pgxs.mk"
# fake_pg_config NAME INCLUDEDIR: a pg_config of PostgreSQL 15.18 whose PGXS is there and whose
# server headers are in INCLUDEDIR
fake_pg_config() {
    cat > "$tmp/$1" <<SH
#!/bin/sh
case "\$1" in
--pgxs) echo "$tmp/pgxs/pgxs.mk" ;;
--includedir-server) echo "$2" ;;
--version) echo "PostgreSQL 15.18 (Debian 15.18-0+deb12u1)" ;;
*) exit 1 ;;
esac
SH
    chmod +x "$tmp/$1"
}
fake_pg_config client-only "$tmp/server"
fake_pg_config with-headers "$tmp/server-full"
mkdir -p "$tmp/server-full"; : > "$tmp/server-full/postgres.h"

out=$(make -n all BUILD="$tmp/b" PG_CONFIG="$tmp/client-only" 2>&1); rc=$?
check "make -n all with PGXS and no server headers exits 0 ($rc)" $rc
n=$(printf '%s\n' "$out" | grep -c "the PostgreSQL extension (pg/) is skipped: no server headers (postgres.h) in $tmp/server; postgresql-server-dev-15 brings them")
[ "$n" -eq 1 ]; check "one line says the extension is skipped and names postgresql-server-dev-15 ($n)" $?
! printf '%s\n' "$out" | grep -q "pg/Makefile\|libddl_pic.a"; check "no step builds the extension without its headers" $?

out=$(make pg BUILD="$tmp/b" PG_CONFIG="$tmp/client-only" 2>&1); rc=$?
[ $rc -ne 0 ] && printf '%s\n' "$out" | grep -q "postgresql-server-dev-15 brings them"
check "make pg without the headers fails in one line naming the package ($rc: $out)" $?
! ls "$tmp/b/pic" "$tmp/b/libddl.a" > /dev/null 2>&1
check "make pg without the headers fails at once, compiling nothing first" $?

out=$(make -n all BUILD="$tmp/b" PG_CONFIG="$tmp/with-headers" 2>&1)
printf '%s\n' "$out" | grep -q "libddl_pic.a" && ! printf '%s\n' "$out" | grep -q "is skipped"
check "with the server headers make all builds the extension" $?

out=$(make -n all BUILD="$tmp/b" PG_CONFIG="$tmp/none" 2>&1)
! printf '%s\n' "$out" | grep -q "is skipped\|libddl_pic.a"
check "without pg_config make all neither builds nor mentions the extension" $?

# make run: the install step and the run are recipes make -n prints; the build is what it compiles
out=$(make -n run BUILD="$tmp/b" PG_CONFIG="$tmp/with-headers" 2>&1)
printf '%s\n' "$out" | grep -q "examples/lenet.c" && printf '%s\n' "$out" | grep -q "tools/ddlrun/main.c"
check "make run compiles lenet and ddlrun" $?
n=$(printf '%s\n' "$out" | grep -c "tests/test_\| -shared \|libddl_pic\|tools/serve/")
[ "$n" -eq 0 ]; check "make run compiles no test, no shared library, no extension, no ddl-serve ($n lines)" $?

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
