#!/bin/sh
# test_docs.sh - the command blocks of README.md, docs/*.md and pg/README.md run as written, so
# that the docs cannot drift from the programs. Every fenced block names its language: sh,
# console and sql blocks are commands a reader pastes, and each one runs here, unless the line
# above it says why not (<!-- doc-test: skip (REASON) -->: several machines, a daemon, a
# benchmark); c, text, json, python and js blocks are programs, output or formats, and are not
# run. A command block without a language, or unmarked and failing, fails this test naming its
# FILE:LINE. tests/doc_blocks.py reads the blocks and documents the convention: besides skip, a
# block's comment may name setups (setup_NAME below: the files or server the block expects, as a
# reader's would be there), replacements made before it runs (replace 'OLD' 'NEW', visible in the
# markdown beside the block: how a block that trains for minutes runs small here), and a
# server the block starts (background PORT).
# Each document's blocks run in order in a directory of their own (a later block uses what an
# earlier one made, as for a reader going down the page) that has `build` (a link to $BUILD), with
# $BUILD/bin first in PATH; each must exit 0 within 120 s, and a console block's shown output
# lines must appear in what its commands print ("..." and numbers match anything). sql blocks
# run through psql -f as the superuser on a private PostgreSQL server (tests/pg_server.sh), in a
# database DB of 1000 Fashion-MNIST test images; without PostgreSQL they are skipped, saying so.
# DOCS_ONLY="FILE..." runs those documents' blocks alone; DOCS_KEEP=1 keeps the blocks, their
# output and directories. 35-65 s on 2 busy cores.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_server.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
DATA=/usr/share/datasets/fashion-mnist
export OPENBLAS_NUM_THREADS=1
skip() { echo "skipped: $*"; echo "0 passed, 0 failed"; exit 0; }
for p in lenet unet ddl-train ddlrun ddl-ckpt ddl-serve ddl-sweep; do [ -x "$BUILD/bin/$p" ] || skip "no $BUILD/bin/$p (make)"; done
[ -d "$DATA" ] && command -v "$PYTHON" > /dev/null || skip "needs $DATA and python3"
command -v curl > /dev/null || skip "needs curl"
t_start=$(date +%s)

tmp=$(mktemp -d) || exit 1
chmod 755 "$tmp"
bg_pids=""
trap 'for p in $bg_pids; do kill -- -$p 2> /dev/null; done; pg_server_stop "$tmp/pg"; [ -n "$DOCS_KEEP" ] || rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
mkdir "$tmp/blocks" "$tmp/home" "$tmp/logs"
[ -n "$DOCS_KEEP" ] && echo "DOCS_KEEP: the blocks, their logs and directories are kept in $tmp"

# ---- the blocks, and the convention's errors ----
"$PYTHON" tests/doc_blocks.py plan "$tmp/blocks" "$tmp" ${DOCS_ONLY:-README.md docs/*.md pg/README.md} > "$tmp/plan.out"
n_bad=$?
grep '^FAIL' "$tmp/plan.out"
[ $n_bad -eq 0 ]; check "every command block runs or says why not ($n_bad do not)" $?
# the start-up lines the docs show ("ddl X.Y.Z: model ...") name this version, as the programs print it
v() { sed -n "s/^#define DDL_VERSION_$1 *\([0-9]*\).*/\1/p" ddl.h; }
version=$(v MAJOR).$(v MINOR).$(v PATCH)
stale=$(grep -n '^ddl [0-9][0-9.]*: model' README.md docs/*.md | grep -v "^[^:]*:[0-9]*:ddl $version: " | cut -c1-80)
[ -z "$stale" ] && grep -q "^ddl $version: model" README.md
check "the docs' start-up lines say ddl $version (${stale:-README.md shows none})" $?
n_skip=$(grep -c '^skip' "$tmp/plan.out")
echo "$n_skip blocks skipped, each saying why (FILE:LINE: reason):"
sed -n 's/^skip: /  /p' "$tmp/plan.out"

# ---- setups: what a block expects to find, made in the current directory ----
# fruits: image folders fruits/{Training,Validation,Test}/CLASS/*.png and photos/CLASS/*.png (two
# classes of 16x16 pictures), and numpy arrays imgs_train.npy (100, 16, 16) with 0/1 masks
# imgs_mask_train.npy, as the README's ddl-train block expects them.
setup_fruits() {
    "$PYTHON" - <<'PY'
import os, random
import numpy as np
from PIL import Image
rng = random.Random(1)
colour = {"apple": (200, 30, 30), "banana": (220, 210, 40)}
for split, n in (("fruits/Training", 16), ("fruits/Validation", 4), ("fruits/Test", 4), ("photos", 3)):
    for name, rgb in colour.items():
        os.makedirs(os.path.join(split, name), exist_ok=True)
        for i in range(n):
            px = np.clip(np.array(rgb) + rng.randint(-30, 30), 0, 255).astype(np.uint8)
            im = np.tile(px, (16, 16, 1))
            im[rng.randint(0, 8):, rng.randint(0, 8):] //= 2
            Image.fromarray(im).save(os.path.join(split, name, "%s_%d.png" % (name, i)))
r = np.random.default_rng(1)
x = r.integers(0, 256, (100, 16, 16), dtype=np.uint8)
np.save("imgs_train.npy", x)
np.save("imgs_mask_train.npy", (x > 127).astype(np.uint8))
PY
}
# item: item.png, a Fashion-MNIST test image as a PNG, and my-images-idx3-ubyte.gz, the first
# 100 test images as an IDX file.
setup_item() {
    "$PYTHON" - "$DATA" <<'PY'
import gzip, sys
from PIL import Image
raw = gzip.open(sys.argv[1] + "/t10k-images-idx3-ubyte.gz").read()
Image.frombytes("L", (28, 28), raw[16:16 + 784]).save("item.png")
gzip.open("my-images-idx3-ubyte.gz", "wb").write(raw[:4] + (100).to_bytes(4, "big") + raw[8:16] + raw[16:16 + 100 * 784])
PY
}
# final: final.ckpt, a LeNet of one short epoch; unet: unet.ckpt, a U-Net of 32x32 scenes.
setup_final() { lenet --epochs 1 --train-limit 2000 --quiet --save final.ckpt > /dev/null; }
setup_unet() { unet --epochs 1 --scenes 64 --test-scenes 16 --size 32 --quiet --save unet.ckpt > /dev/null; }
# pg: the extension installed, a private server (started once), and a database DB made afresh
# with tables images (id, img: 1000 test images as raw pixels) and scenes (id, scene: 32x32),
# the extension created already (a block that sets ddl.model_dir must work in a later session
# than the one that created it: there the library is not loaded), the models lenet.ddl and
# unet.ddl in $tmp/models (the blocks' /srv/models, through replace) and lenet.ddl here too;
# PGHOST, PGUSER and PGDATABASE name it for psql and libpq.
pg_ok=""
setup_pg() {
    if [ -z "$pg_ok" ]; then
        pg_ok=no
        pg_server_need || { pg_why=$PG_WHY; return 0; }
        [ -f "$(${PG_CONFIG:-pg_config} --includedir-server 2>/dev/null)/postgres.h" ] || {
            pg_why="no PostgreSQL server headers to build the extension (Debian: postgresql-server-dev-15)"; return 0; }
        [ -w "$(pg_config --pkglibdir)" ] || {
            pg_why="cannot install the extension into $(pg_config --pkglibdir) as $(id -un)"; return 0; }
        (cd "$ROOT" && make -s pg-install BUILD="$BUILD") > "$tmp/pg-install.log" 2>&1 || {
            cat "$tmp/pg-install.log"; echo "make pg-install failed"; return 1; }
        mkdir "$tmp/pg" "$tmp/models"
        pg_server_init "$tmp/pg" && pg_server_start "$tmp/pg" || return 1
        lenet --epochs 1 --train-limit 2000 --quiet --save "$tmp/models/lenet.ddl" > /dev/null &&
            unet --epochs 1 --scenes 64 --test-scenes 16 --size 32 --quiet --save "$tmp/models/unet.ddl" > /dev/null ||
            return 1
        chmod 644 "$tmp/models"/*
        "$PYTHON" - "$DATA" "$tmp/images.copy" <<'PY' || return 1
import gzip, sys
px = gzip.open(sys.argv[1] + "/t10k-images-idx3-ubyte.gz").read()[16:]
with open(sys.argv[2], "w") as f:
    for i in range(1000):
        f.write("%d\t\\\\x%s\n" % (i, px[i * 784:(i + 1) * 784].hex()))
PY
        pg_ok=yes
    fi
    [ "$pg_ok" = yes ] || return 0
    export PGHOST="$tmp/pg" PGUSER=postgres PGDATABASE=DB
    $AS "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -d postgres -c 'DROP DATABASE IF EXISTS "DB"' -c 'CREATE DATABASE "DB"' &&
        $AS "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -c "CREATE TABLE images (id int PRIMARY KEY, img bytea)" \
            -c "COPY images FROM '$tmp/images.copy'" \
            -c "CREATE TABLE scenes AS SELECT id, substr(img || img, 1, 1024) AS scene FROM images WHERE id < 10" \
            -c "CREATE EXTENSION ddl" &&
        cp "$tmp/models/lenet.ddl" .
}

# ---- running the blocks ----
# stop_background: stop the servers the last document's blocks started
stop_background() {
    for p in $bg_pids; do kill -- -$p 2> /dev/null; done
    bg_pids=""
}
# port_taken PORT: something on 127.0.0.1 takes connections at PORT
port_taken() { "$PYTHON" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$1" 2> /dev/null; }

export PATH="$ROOT/$BUILD/bin:$PATH" HOME="$tmp/home"
doc_dir=""
while IFS="$(printf '\t')" read -r id where lang slug setups port; do
    dir=$tmp/w/$slug
    if [ "$dir" != "$doc_dir" ]; then
        stop_background
        mkdir -p "$dir" && ln -s "$ROOT/$BUILD" "$dir/build"
        doc_dir=$dir
        done_setups=" "
    fi
    cd "$dir" || exit 1
    log=$tmp/logs/$id.log
    t0=$(date +%s)
    ok_setups=1
    for s in $(echo "$setups" | tr , ' '); do
        [ "$s" = - ] && continue
        case "$done_setups" in *" $s "*) continue ;; esac
        if command -v "setup_$s" > /dev/null && "setup_$s" > "$tmp/logs/$id.setup.log" 2>&1; then
            done_setups="$done_setups$s "
        else
            cat "$tmp/logs/$id.setup.log"; bad "$where: setup $s failed"; ok_setups=0
        fi
    done
    if [ $ok_setups = 0 ]; then cd "$ROOT"; continue; fi
    if [ "$lang" = sql ] || case ",$setups," in *,pg,*) true ;; *) false ;; esac; then
        if [ "$pg_ok" != yes ]; then
            echo "$where: not run: $pg_why"; pg_skipped="${pg_skipped:+$pg_skipped, }$where"; cd "$ROOT"; continue
        fi
    fi
    if [ "$port" != - ]; then # a server: started, then ready when its port takes connections
        if port_taken "$port"; then bad "$where: port $port is taken before the block starts"; cd "$ROOT"; continue; fi
        setsid bash -e "$tmp/blocks/$id.$lang" > "$log" 2>&1 &
        bg_pids="$bg_pids $!"
        i=0; while [ $i -lt 100 ] && ! port_taken "$port" && kill -0 $! 2> /dev/null; do sleep 0.1; i=$((i + 1)); done
        port_taken "$port"; rc=$?
    elif [ "$lang" = sh ]; then
        timeout 120 bash -e "$tmp/blocks/$id.sh" > "$log" 2>&1; rc=$?
    elif [ "$lang" = console ]; then
        timeout 120 "$PYTHON" "$ROOT/tests/doc_blocks.py" console "$tmp/blocks/$id.console" "$log" > "$log.why" 2>&1
        rc=$?
    else
        timeout 120 $AS "$PGBIN/psql" -X -v ON_ERROR_STOP=1 -f "$tmp/blocks/$id.sql" > "$log" 2>&1; rc=$?
    fi
    secs=$(( $(date +%s) - t0 ))
    if [ $rc -eq 0 ]; then
        ok; echo "$where: ran ($lang, ${secs}s)"
    else
        bad "$where: the $lang block failed (status $rc, ${secs}s)"
        sed 's/^/    /' "$tmp/blocks/$id.$lang"; echo "  said:"
        cat "$log.why" 2> /dev/null | sed 's/^/    /'; tail -n 15 "$log" | sed 's/^/    /'
    fi
    cd "$ROOT" || exit 1
done < "$tmp/blocks/plan"
stop_background
[ -n "$pg_skipped" ] && echo "skipped: the PostgreSQL blocks ($pg_skipped): $pg_why"
echo "the doc test took $(( $(date +%s) - t_start )) s"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
