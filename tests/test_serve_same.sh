#!/bin/sh
# test_serve_same.sh - one decoder: the same image file gives the same probabilities, bit for
# bit, down every path a model is used on: ddl-train --predict, the C predictor (ddl_image_load
# and ddl_predictor_run, through libddl.so), ddl-serve (the file as an image body; its pixels as
# TF Serving JSON in (C, H, W) and (H, W, C), and as KServe v2 JSON of shape [1, C, H, W] and
# [1, H, W, C]), ddl-train --predict --db over a table of the files, and ddl_predict_proba in
# PostgreSQL (the file as a bytea: the bits of the same
# pixels as raw bytes; the extension is built without OpenBLAS, so its sums are within a few ulps
# of the other paths', which use it, and exactly theirs where none does). The images are those
# of the image tests (tests/images/make_images.py: RGB, grey, RGBA and palette PNGs; grey, RGB
# and CMYK JPEGs; PPM, PGM) and PNGs of every colour type and bit depth (1 to 16 bits, alpha,
# palette, Adam7), of sizes from 7x3 to 200x120, each resized to the models' 16x16; the models
# a grey and a colour cnn trained for a few steps on a folder (tests/train/make_fruits.py).
# A forward pass of several images gives their probabilities within an ulp or two of passes of
# one (OpenBLAS takes gemv for one row, gemm for more), so --predict is run with --batch 1
# against passes of one, and with its default batch against one pass of all the images.
# Images of any size are taken (a 2500x2000 PNG) up to what a request's arena decodes (a
# 5000x5000 PNG is a 413); JSON of another shape is a 400 naming the shapes the model takes; for
# a model of input 3x3x3 an instance of [3, 3, 3] is read as (C, H, W).
# The PostgreSQL part skips, with its reason, where no server can run. About 20 s.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_server.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
. tests/serve_lib.sh
[ -f "$BUILD/libddl.so" ] || skip "no $BUILD/libddl.so (SHARED=0): the C predictor is reached through it"
tmp=$(mktemp -d) || exit 1
spid=""
trap '[ -n "$spid" ] && kill $spid 2> /dev/null; pg_server_stop "$tmp/pg" 2> /dev/null; [ -n "$KEEP" ] && cp -r "$tmp" "$KEEP"; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
# under SAN=address libddl.so wants ASan's runtime first in a python that was built without it
asan=$(ldd "$BUILD/libddl.so" 2> /dev/null | awk '/libasan/ { print $3 }')
py_lib() { LD_PRELOAD="$asan" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$PYTHON" "$@"; }

"$PYTHON" tests/serve/same_images.py "$tmp" && n=$(wc -l < "$tmp/list") && [ "$n" -ge 25 ]
check "the images: $n files of every mode, bit depth and several sizes" $?
"$PYTHON" tests/train/make_fruits.py "$tmp/fruits" 8 1 16 > /dev/null; check "a folder of fruit photos" $?
for m in grey rgb; do
    c=1; [ $m = rgb ] && c=3
    "$B/ddl-train" --data "$tmp/fruits/train" --arch cnn:4 --image-size 16 --channels $c --epochs 1 --batch 8 --quiet \
        --save "$tmp/$m.ckpt" > "$tmp/$m.train" 2>&1
    check "a $m model (cnn:4, $c channel(s), 16x16) trained for 3 steps" $?
done

# a model of input 3x3x3, where (C, H, W) and (H, W, C) have the same shape
printf 'input 3 3 3\nflatten\ndense fc classes\n' > "$tmp/cube.arch" &&
    "$B/ddl-train" --data "$tmp/fruits/train" --arch "$tmp/cube.arch" --image-size 3 --epochs 1 --batch 8 --quiet \
        --save "$tmp/cube.ckpt" > "$tmp/cube.train" 2>&1
check "a model of input 3x3x3" $?

port=$(free_port)
"$B/ddl-serve" --listen "127.0.0.1:$port" --model grey="$tmp/grey.ckpt" --model rgb="$tmp/rgb.ckpt" \
    --model cube="$tmp/cube.ckpt" 2> "$tmp/serve.log" &
spid=$!
serve_wait "$port"

for m in grey rgb; do
    c=1; [ $m = rgb ] && c=3
    mkdir "$tmp/$m"
    py_lib tests/serve/same_probs.py lib "$BUILD/libddl.so" "$tmp/$m.ckpt" "$tmp/img" "$tmp/list" $c 16 16 "$tmp/$m" \
        "$port" $m 2> "$tmp/$m.err"
    rc=$?; [ $rc -eq 0 ] && [ "$(wc -l < "$tmp/$m/c.txt")" -eq "$n" ]
    check "$m: the C predictor and ddl-serve answer every image (exit $rc$(head -c 300 "$tmp/$m.err"))" $?
    for b in 1 64; do
        "$B/ddl-train" --predict --model "$tmp/$m.ckpt" --images "$tmp/img" --batch $b --out "$tmp/$m/p$b.csv" \
            > /dev/null 2>&1 && "$PYTHON" tests/serve/same_probs.py csv "$tmp/$m/p$b.csv" > "$tmp/$m/predict$b.txt"
        check "$m: ddl-train --predict --batch $b" $?
    done
    same() { # FILE WANT WHAT: FILE's probabilities are WANT's, bit for bit
        if cmp -s "$tmp/$m/$1.txt" "$tmp/$m/$2.txt"; then ok; else
            bad "$m: $3: not the bits of $2 on $(grep -cvxFf "$tmp/$m/$1.txt" "$tmp/$m/$2.txt") of $n images"
            diff "$tmp/$m/$2.txt" "$tmp/$m/$1.txt" | head -n 4 | sed 's/^/    /'
        fi
    }
    same predict1 c "ddl-train --predict --batch 1 = the C predictor, an image a pass"
    same predict64 cbatch "ddl-train --predict (a pass of all) = the C predictor, one pass of all"
    same v1_image c "ddl-serve, the file as an image body (v1)"
    same v1_chw c "ddl-serve, its pixels as v1 JSON (C, H, W)"
    same v1_hwc c "ddl-serve, its pixels as v1 JSON (H, W, C)"
    same v1_hwc_tree c "ddl-serve, its pixels as v1 JSON (H, W, C) with another key (the tree path)"
    same v2_chw c "ddl-serve, its pixels as v2 JSON [1, C, H, W]"
    same v2_hwc c "ddl-serve, its pixels as v2 JSON [1, H, W, C]"
done

# ---- what cannot be an input: refused, naming what the model takes ----
"$PYTHON" - "$tmp" <<'PY'
import json, struct, sys, zlib
t = sys.argv[1]
def chunk(k, d): return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d))
def png(w, h, path):  # grey, 8 bits: small deflated, w * h * 4 bytes decoded (as RGBA)
    raw = (b"\0" + bytes((x * 7) % 256 for x in range(w))) * h
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
                           chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
png(2500, 2000, t + "/large.png"); png(5000, 5000, t + "/huge.png")
px = [[[0, 0, 0, 0]] * 16] * 16
json.dump({"instances": [px]}, open(t + "/rgba.json", "w"))
json.dump({"inputs": [{"name": "input", "shape": [1, 16, 16, 4], "datatype": "UINT8", "data": px}]}, open(t + "/rgba2.json", "w"))
PY
post() { curl -s -o "$tmp/out" -w '%{http_code}' -H "Content-Type: $2" --data-binary @"$tmp/$1" "127.0.0.1:$port$3"; }
[ "$(post large.png image/png /v1/models/rgb:predict)" = 200 ]; check "a PNG of 2500x2000 (5 megapixels): 200" $?
[ "$(post huge.png image/png /v1/models/rgb:predict)" = 413 ] && grep -q 'needs more than the 64 MB this server decodes' "$tmp/out"
check "a PNG of 5000x5000 (100 MB decoded): 413, refused when the arena is full ($(cat "$tmp/out"))" $?
[ "$(post rgba.json application/json /v1/models/rgb:predict)" = 400 ] &&
    grep -qF 'instance 0: shape [16, 16, 4], model rgb takes [3, 16, 16] (C, H, W), [16, 16, 3] (H, W, C) or [768]' "$tmp/out"
check "v1: 16x16x4 pixels: 400 naming the shapes the model takes ($(cat "$tmp/out"))" $?
[ "$(post rgba2.json application/json /v2/models/rgb/infer)" = 400 ] &&
    grep -qF 'shape: model rgb takes [n, 3, 16, 16] (C, H, W), [n, 16, 16, 3] (H, W, C) or [n, 768]' "$tmp/out"
check "v2: shape [1, 16, 16, 4]: 400 naming the shapes ($(cat "$tmp/out"))" $?

# C == H == W: nested [3, 3, 3] is taken as (C, H, W), the answer of the flat list in its order
"$PYTHON" - "$tmp" <<'PY'
import json, sys
t = sys.argv[1]
x = [[[(c * 97 + y * 31 + w * 7) % 256 for w in range(3)] for y in range(3)] for c in range(3)]
flat = [v for a in x for b in a for v in b]
as_hwc = [x[y][w][c] for c in range(3) for y in range(3) for w in range(3)]  # x read as (H, W, C), in (C, H, W) order
for name, inst in (("nested", x), ("flat", flat), ("hwc", as_hwc)):
    json.dump({"instances": [inst]}, open("%s/cube_%s.json" % (t, name), "w"))
PY
for k in nested flat hwc; do post cube_$k.json application/json /v1/models/cube:predict > /dev/null; cp "$tmp/out" "$tmp/cube_$k.out"; done
cmp -s "$tmp/cube_nested.out" "$tmp/cube_flat.out" && ! cmp -s "$tmp/cube_nested.out" "$tmp/cube_hwc.out"
check "3x3x3: [3, 3, 3] is taken as (C, H, W), not (H, W, C) ($(cat "$tmp/cube_nested.out"))" $?

# ---- PostgreSQL: ddl_predict_proba of each file as a bytea ----
pg_why=""
[ -f "$(pg_config --pgxs 2>/dev/null)" ] || pg_why="no pg_config with PGXS (Debian: postgresql-15 postgresql-server-dev-15)"
[ -z "$pg_why" ] && ! pg_server_need && pg_why=$PG_WHY
[ -z "$pg_why" ] && [ ! -w "$(pg_config --pkglibdir)" ] && pg_why="cannot install the extension as $(id -un)"
[ -z "$pg_why" ] && ! make -s pg-install BUILD="$BUILD" > "$tmp/pg-make.log" 2>&1 && pg_why="make pg-install failed"
if [ -n "$pg_why" ]; then
    echo "skipped: the PostgreSQL part: $pg_why"
else
    mkdir -p "$tmp/pg/models" && cp "$tmp/grey.ckpt" "$tmp/rgb.ckpt" "$tmp/pg/models/" &&
        chmod 755 "$tmp" && chmod 644 "$tmp/pg/models"/*
    [ -n "$AS" ] && chown -R postgres "$tmp/pg/models"
    pg_server_init "$tmp/pg" "ddl.model_dir = '$tmp/pg/models'" && pg_server_start "$tmp/pg"
    check "a PostgreSQL server of this test's own" $?
    sql() { $AS "$PGBIN/psql" -h "$tmp/pg" -U postgres -d postgres -X -q -At -v ON_ERROR_STOP=1 "$@"; }
    "$PYTHON" - "$tmp" > "$tmp/images.sql" <<'PY'
import os, sys
t = sys.argv[1]
print("CREATE EXTENSION ddl; CREATE TABLE images (name text, img bytea);")
for n in open(t + "/list").read().split():
    print("INSERT INTO images VALUES ('%s', '\\x%s');" % (n, open(os.path.join(t, "img", n), "rb").read().hex()))
PY
    sql -f "$tmp/images.sql" > /dev/null; check "the images in a table" $?
    for m in grey rgb; do
        sed "s/^\([^ ]*\) \(.*\)/INSERT INTO raw VALUES ('\1', '\\\\x\2');/" "$tmp/$m/pixels.txt" > "$tmp/$m/raw.sql"
        sql -c "SET client_min_messages = warning; DROP TABLE IF EXISTS raw; CREATE TABLE raw (name text, img bytea)" -f "$tmp/$m/raw.sql" > /dev/null &&
            sql -c "SELECT name, ddl_predict_proba('$m.ckpt', img) FROM images ORDER BY name COLLATE \"C\"" > "$tmp/$m/pg.out" &&
            sql -c "SELECT name, ddl_predict_proba('$m.ckpt', img) FROM raw ORDER BY name COLLATE \"C\"" > "$tmp/$m/pgraw.out" &&
            "$PYTHON" tests/serve/same_probs.py pg "$tmp/$m/pg.out" > "$tmp/$m/pg.txt" &&
            "$PYTHON" tests/serve/same_probs.py pg "$tmp/$m/pgraw.out" > "$tmp/$m/pgraw.txt" &&
            [ "$(wc -l < "$tmp/$m/pg.txt")" -eq "$n" ]
        check "$m: ddl_predict_proba of every image, as its file and as the library's pixels" $?
        same pg pgraw "ddl_predict_proba of the file as a bytea = of the C predictor's pixels as raw bytes"
        # the extension's own build has no OpenBLAS (its threads in every backend): ddl's gemm sums in another order
        u=$("$PYTHON" tests/serve/same_probs.py ulps "$tmp/$m/pg.txt" "$tmp/$m/c.txt")
        [ "${u:-99}" -le 8 ]; check "$m: ddl_predict_proba within 8 float32 ulps of the C predictor with OpenBLAS ($u)" $?
        # ddl-train --predict --db: the table's rows in one pass (its batch is 64)
        "$B/ddl-train" --predict --model "$tmp/$m.ckpt" --db "host=$tmp/pg user=postgres dbname=postgres" --table images \
            --id name --out-table "db_$m" > "$tmp/$m/db.log" 2>&1 &&
            sql -c "SELECT name, probabilities FROM db_$m ORDER BY name COLLATE \"C\"" > "$tmp/$m/db.out" &&
            "$PYTHON" tests/serve/same_probs.py pg "$tmp/$m/db.out" > "$tmp/$m/db.txt"
        check "$m: ddl-train --predict --db scores the table ($(tail -n 1 "$tmp/$m/db.log"))" $?
        same db cbatch "ddl-train --predict --db of the files as bytea = the C predictor, one pass of all"
    done
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
