#!/bin/sh
# test_pg_ranks.sh - ranks that score a PostgreSQL table (--predict --db, common/example_db.h)
# against a real PostgreSQL 15 that this test starts as test_pg.sh does (initdb in a temporary
# directory, pg_ctl on a Unix socket there, as the user postgres when run as root; stopped on
# EXIT). The 10,000 Fashion-MNIST test images in a table (bigint ids 7, 10, 13...; every 1000th a
# PNG, the rest raw pixels): lenet --predict --db on 1 rank and on 2 (ddlrun -n 2) write the same
# predictions table, row for row lenet --predict's on the same images from the IDX file;
# ddl-train --predict --db the same classes; a rank killed halfway through a batch's COPY leaves
# only whole batches (every batch of the split is all there or absent, the killed rank's first
# two are there); unet --db writes a mask per row, the same on 1 and 2 ranks, with no data set to
# make scenes of; a bad row, a missing table or database fail naming it; quoted names; a server
# that never answers (a fake one that lets libpq connect) and a COPY held by a lock fail within
# --db-timeout naming the statement, and the server drops the abandoned statement (its
# statement_timeout). Skips where PostgreSQL or libpq is missing. About 35 s.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_server.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
DATA=/usr/share/datasets/fashion-mnist
B=$BUILD/bin
export OPENBLAS_NUM_THREADS=1
skip() { echo "skipped: $*"; echo "0 passed, 0 failed"; exit 0; }

# ---- what it needs ----
pg_server_need || skip "$PG_WHY"
[ -d "$DATA" ] && command -v "$PYTHON" > /dev/null || skip "needs $DATA and python3"
for p in lenet unet ddl-train ddlrun; do [ -x "$B/$p" ] || skip "no $B/$p (make)"; done
nm "$B/lenet" 2>/dev/null | grep -q PQconnectdbParams || skip "$B/lenet built without libpq (libpq-dev)"

# ---- a server of its own ----
tmp=$(mktemp -d) || exit 1
trap 'pg_server_stop "$tmp"; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
pg_server_init "$tmp"
check "initdb" $?
if ! pg_server_start "$tmp"; then bad "pg_ctl start"; echo "$pass passed, $fail failed"; exit 1; fi
ok
sql() { $AS "$PGBIN/psql" -h "$tmp" -U postgres -d ddl -X -q -At -v ON_ERROR_STOP=1 "$@"; }
$AS "$PGBIN/createdb" -h "$tmp" -U postgres ddl; check "createdb" $?
URI="postgresql://postgres@/ddl?host=$tmp"

# ---- models and the images: as a table, and lenet --predict on the IDX file ----
"$B/lenet" --epochs 1 --train-limit 2000 --quiet --save "$tmp/a.ddl" > /dev/null 2>&1; check "lenet trains" $?
"$B/unet" --epochs 1 --scenes 64 --test-scenes 16 --size 32 --quiet --save "$tmp/unet.ddl" > /dev/null 2>&1
check "unet trains" $?
"$B/lenet" --predict --model "$tmp/a.ddl" --out "$tmp/a.csv" > /dev/null 2>&1; check "lenet --predict on the IDX file" $?
"$PYTHON" - "$DATA" "$tmp" <<'PY'
import gzip, struct, sys, zlib
data, tmp = sys.argv[1], sys.argv[2]
px = gzip.open(data + "/t10k-images-idx3-ubyte.gz").read()[16:]
def png(w, h, pix):
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    rows = b"".join(b"\0" + pix[r * w:(r + 1) * w] for r in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
with open(tmp + "/images.copy", "w") as f:  # id 3 i + 7 for image i; every 1000th as a PNG
    for i in range(10000):
        im = px[i * 784:(i + 1) * 784]
        f.write("%d\t\\\\x%s\n" % (3 * i + 7, (png(28, 28, im) if i % 1000 == 0 else im).hex()))
PY
check "images written" $?
sql -c "CREATE TABLE images (id bigint PRIMARY KEY, img bytea)" -c "\\copy images FROM '$tmp/images.copy'" -c "ANALYZE images"
check "10000 images loaded" $?
# the CSV as (id, class, p0..p9) rows
tail -n +2 "$tmp/a.csv" | awk -F, '{ printf "%d,%d", 3 * $1 + 7, $2; for (k = 4; k <= 13; k++) printf ",%s", $k; printf "\n" }' \
    > "$tmp/want.csv"
# same_as_csv TABLE: its rows as the CSV's: the same ids and classes, probabilities within its 6 decimals
same_as_csv() {
    sql -F, -c "SELECT id, class, array_to_string(probabilities, ',') FROM $1 ORDER BY id" > "$tmp/got.csv"
    paste -d, "$tmp/want.csv" "$tmp/got.csv" | awk -F, -v tol="${2:-6e-7}" '
        { if ($1 != $13 || $2 != $14) bad++; for (k = 0; k < 10; k++) { d = $(3 + k) - $(15 + k); if (d < 0) d = -d; if (d > tol) bad++ } n++ }
        END { exit bad || n != 10000 }'
}

# ---- 1 rank, 2 ranks: the same table, lenet --predict's rows ----
start=$(date +%s)
"$B/lenet" --predict --model "$tmp/a.ddl" --db "$URI" --table images --id id --image img --out-table p1 > "$tmp/p1.out" 2>&1
check "lenet --predict --db on 1 rank exits 0 ($(tail -n 1 "$tmp/p1.out"))" $?
same_as_csv p1; check "1 rank: 10000 rows, lenet --predict's classes and probabilities on the IDX file" $?
[ "$(sql -c "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'p1'::regclass AND attname = 'id'")" = bigint ]
check "the output's id is the input's type (bigint)" $?
"$B/ddlrun" -n 2 "$B/lenet" --predict --model "$tmp/a.ddl" --db "$URI" --table images --id id --image img \
    --out-table p2 > "$tmp/p2.out" 2>&1
check "ddlrun -n 2 lenet --predict --db exits 0 ($(grep scored "$tmp/p2.out"))" $?
grep -h scored "$tmp/p1.out" "$tmp/p2.out"
[ "$(sql -c "SELECT count(*) FROM p2")" = 10000 ] &&
    [ "$(sql -c "SELECT count(*) FROM ((SELECT * FROM p1 EXCEPT ALL SELECT * FROM p2) UNION ALL (SELECT * FROM p2 EXCEPT ALL SELECT * FROM p1)) d")" = 0 ]
check "2 ranks: the same table as 1 rank, row for row (bit for bit)" $?
"$B/ddlrun" -n 2 "$B/ddl-train" --predict --model "$tmp/a.ddl" --db "$URI" --table images --out-table p3 > "$tmp/p3.out" 2>&1
check "ddlrun -n 2 ddl-train --predict --db exits 0" $?
same_as_csv p3 2e-5; check "ddl-train --db: lenet --predict's classes, probabilities within 2e-5" $?

# ---- a rank killed halfway through a batch's COPY: whole batches only ----
DDL_EXAMPLE_DB_DIE=1:3 "$B/ddlrun" -n 2 "$B/lenet" --predict --model "$tmp/a.ddl" --db "$URI" --table images \
    --out-table p4 > "$tmp/p4.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "killed halfway through batch 3" "$tmp/p4.out"
check "a rank killed mid-batch: the run fails (exit $rc)" $?
# batches of 64 by position in id order; rank 1's share starts at pass 78 (157 passes over 2 ranks)
set -- $(sql -F' ' -c "WITH pos AS (SELECT id, (row_number() OVER (ORDER BY id) - 1) / 64 AS b FROM images),
    per AS (SELECT pos.b, count(*) AS want, count(p4.id) AS got FROM pos LEFT JOIN p4 USING (id) GROUP BY pos.b)
    SELECT count(*) FILTER (WHERE got <> 0 AND got <> want), coalesce(sum(got) FILTER (WHERE b >= 78), 0),
           (SELECT count(*) FROM p4) FROM per")
[ "$1" = 0 ] && [ "$2" = 128 ]
check "only whole batches committed ($1 partial; rank 1 has $2 rows = its 2 batches before the kill; $3 in all)" $?
echo "killed run: $3 rows committed, rank 1 $2 (its 2 batches before the kill), $1 partial batches"

# ---- U-Net: a mask per row, the same on 1 and 2 ranks ----
sql -c "CREATE TABLE scenes AS SELECT id, substr(img || img, 1, 1024) AS img FROM images WHERE id < 7 + 3 * 200 AND id % 3000 <> 7"
"$B/unet" --predict --model "$tmp/unet.ddl" --data "$tmp/no-data" --db "$URI" --table scenes --out-table m1 > "$tmp/m1.out" 2>&1
check "unet --predict --db on 1 rank, with no Fashion-MNIST to make scenes of ($(tail -n 1 "$tmp/m1.out"))" $?
"$B/ddlrun" -n 2 "$B/unet" --predict --model "$tmp/unet.ddl" --test-scenes 1 --batch 8 --db "$URI" --table scenes \
    --out-table m2 > "$tmp/m2.out" 2>&1
check "ddlrun -n 2 unet --predict --db --batch 8" $?
n=$(sql -c "SELECT count(*) FROM m1 WHERE length(mask) = 1024 AND (SELECT max(get_byte(mask, k)) FROM generate_series(0, 1023) k) <= 10")
[ "$n" = "$(sql -c "SELECT count(*) FROM scenes")" ] && [ "$n" -gt 100 ]
check "unet: a 32 x 32 mask of classes 0 to 10 for each of the $n rows" $?
[ "$(sql -c "SELECT count(*) FROM m1 FULL JOIN m2 USING (id) WHERE m1.mask IS DISTINCT FROM m2.mask")" = 0 ]
check "unet: the same masks on 1 and 2 ranks (batch 8)" $?

# ---- bad input: one line naming what was wrong, exit 1 ----
# fails NAME PATTERN COMMAND...: the command exits 1 and its output matches PATTERN
fails() {
    name=$1 pat=$2; shift 2
    out=$("$@" 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q -- "$pat"; then ok; else bad "$name: exit $rc, said: $out"; fi
}
sql -c "CREATE TABLE broken AS SELECT * FROM images WHERE id < 7 + 3 * 300" -c "UPDATE broken SET img = '\\x0102' WHERE id = 610"
fails "a wrong-size row" "row id=610 of broken: an image of 2 bytes" \
    "$B/ddlrun" -n 2 "$B/lenet" --predict --model "$tmp/a.ddl" --db "$URI" --table broken --out-table pb
sql -c "UPDATE broken SET img = NULL WHERE id = 610"
fails "a NULL image" "row id=610 of broken: the image (img) is NULL" \
    "$B/lenet" --predict --model "$tmp/a.ddl" --db "$URI" --table broken --out-table pb
fails "no such table" 'relation "nope" does not exist' \
    "$B/lenet" --predict --model "$tmp/a.ddl" --db "$URI" --table nope --out-table pb
fails "no such column" "table images has no column label (--id)" \
    "$B/lenet" --predict --model "$tmp/a.ddl" --db "$URI" --table images --id label --out-table pb
fails "no such database" 'cannot connect to the database:.*"nodb" does not exist' \
    "$B/ddlrun" -n 2 "$B/lenet" --predict --model "$tmp/a.ddl" --db "postgresql://postgres@/nodb?host=$tmp" \
    --table images --out-table pb
out=$("$B/ddl-train" --predict --model "$tmp/a.ddl" --db "$URI" 2>&1)
[ $? -eq 2 ] && printf '%s\n' "$out" | grep -q -- "--db needs --table T and --out-table OUT"
check "ddl-train --db without --table: a usage error (said: $out)" $?
# names that need quoting are quoted, not pasted
sql -c 'CREATE TABLE "Odd; DROP TABLE images --" ("The Id" int, "pix els" bytea)' \
    -c "INSERT INTO \"Odd; DROP TABLE images --\" SELECT (id - 7) / 3, img FROM images WHERE id < 100"
"$B/lenet" --predict --model "$tmp/a.ddl" --db "$URI" --table 'Odd; DROP TABLE images --' --id 'The Id' \
    --image 'pix els' --out-table 'out "quoted"' > "$tmp/q.out" 2>&1
[ $? -eq 0 ] && [ "$(sql -c 'SELECT count(*) FROM "out ""quoted"""')" = 31 ] && [ "$(sql -c "SELECT count(*) FROM images")" = 10000 ]
check "names quoted with PQescapeIdentifier ($(cat "$tmp/q.out"))" $?
echo "scoring runs took $(($(date +%s) - start)) s"

# ---- a server that stalls: an error naming the statement within --db-timeout, no hang ----
# a fake server on a Unix socket: it lets libpq connect, then never answers a query
mkdir "$tmp/fake"
"$PYTHON" - "$tmp/fake/.s.PGSQL.5432" <<'PY' &
import socket, struct, sys
def msg(t, body): return t + struct.pack(">I", len(body) + 4) + body
def param(k, v): return msg(b"S", k.encode() + b"\0" + v.encode() + b"\0")
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(8); s.settimeout(60)
held = []
while True:
    try:
        c, _ = s.accept()
    except OSError:
        break
    n = struct.unpack(">I", c.recv(4, socket.MSG_WAITALL))[0]
    c.recv(n - 4, socket.MSG_WAITALL)  # the startup packet
    c.sendall(msg(b"R", struct.pack(">I", 0)) + param("server_version", "15.0") + param("client_encoding", "UTF8")
              + param("standard_conforming_strings", "on") + param("integer_datetimes", "on")
              + msg(b"K", struct.pack(">II", 1, 2)) + msg(b"Z", b"I"))
    held.append(c)  # and never a word more
PY
fake_pid=$!
i=0; while [ $i -lt 50 ] && [ ! -S "$tmp/fake/.s.PGSQL.5432" ]; do sleep 0.1; i=$((i + 1)); done
t0=$(date +%s)
out=$(timeout 60 "$B/lenet" --predict --model "$tmp/a.ddl" --db "host=$tmp/fake port=5432 user=u dbname=d" \
    --table images --out-table pt --db-timeout 2 2>&1)
rc=$? secs=$(($(date +%s) - t0))
kill $fake_pid 2> /dev/null; wait $fake_pid 2> /dev/null
[ $rc -eq 1 ] && [ $secs -le 10 ] && printf '%s\n' "$out" | grep -q "images: the database did not answer within 2 s (--db-timeout): BEGIN"
check "a server that never answers: exit 1 in ${secs} s (--db-timeout 2) naming the statement (exit $rc, said: $out)" $?
# a real server whose COPY waits on a lock held meanwhile: the COPY's error, and the server drops
# the statement a second after the client gave up (statement_timeout: no backend left waiting)
sql -c "CREATE TABLE plock (id bigint, class int, probabilities real[])"
sql -c "BEGIN" -c "LOCK TABLE plock" -c "SELECT pg_sleep(60)" > /dev/null 2>&1 &
lock_pid=$!
i=0; while [ $i -lt 100 ] && [ "$(sql -c "SELECT count(*) FROM pg_locks WHERE relation = 'plock'::regclass AND granted")" != 1 ]; do
    sleep 0.1; i=$((i + 1)); done
t0=$(date +%s)
out=$(timeout 60 "$B/lenet" --predict --model "$tmp/a.ddl" --db "$URI" --table images --out-table plock --db-timeout 2 2>&1)
rc=$? secs=$(($(date +%s) - t0))
[ $rc -eq 1 ] && [ $secs -le 10 ] &&
    printf '%s\n' "$out" | grep -q "the database did not answer within 2 s (--db-timeout): COPY \"plock\""
check "a COPY held by a lock: exit 1 in ${secs} s naming it (exit $rc, said: $out)" $?
i=0; while [ $i -lt 100 ] && [ "$(sql -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'lenet'")" != 0 ]; do
    sleep 0.1; i=$((i + 1)); done
[ $i -lt 100 ]; check "the server ended the abandoned statement within $((i / 10)) s (statement_timeout)" $?
sql -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'" > /dev/null
wait $lock_pid 2> /dev/null

$AS "$PGBIN/pg_ctl" -D "$tmp/data" -m fast -w stop > /dev/null 2>&1; check "pg_ctl stop" $?
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
