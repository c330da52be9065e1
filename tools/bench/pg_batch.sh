#!/bin/sh
# pg_batch.sh - make bench's many-rows-per-call scoring in PostgreSQL (BENCH_ONLY=pg_batch): the
# extension's _batch functions against its row functions, in one backend, no parallel workers
# (max_parallel_workers_per_gather = 0):
#   LeNet over ROWS images (default 50,000: the 10,000 Fashion-MNIST test images repeated, raw
#     pixels), SELECT sum(ddl_predict('lenet.ddl', img)) FROM images against
#     SELECT sum(c) FROM (SELECT ddl_predict_batch('lenet.ddl', array_agg(img)) AS c FROM images
#     GROUP BY id / ARRAY_ROWS) b   (arrays of ARRAY_ROWS rows, default 1000);
#   U-Net (64 x 64 scenes: the test images tiled) over UNET_ROWS scenes (default 2,000),
#     ddl_segment against ddl_segment_batch, the same way.
# For each ddl.batch_size in BATCH_SIZES (default 64, the GUC's default; ddl.batch_memory stays at
# its 4 MB, which makes U-Net's passes one image), REPEAT (default 3)
# alternated runs, each in a session of its own whose backend has already loaded the model and
# run a pass of each form: rows/s, medians, their ratio, and the median of the runs' ratios; and
# rows per second of the backend's CPU time (utime + stime), which other work on the machine
# disturbs far less than the time the query took. First the two forms must give the same
# bits (LeNet: every probability of the 10,000 distinct images; U-Net: every mask); then the
# memory a backend holds per model: its VmRSS (/proc/PID/status) when it starts, after its first
# row scored and after its first array, and the 'ddl models' memory context's bytes after each.
# The server is this script's own, as tests/test_pg.sh starts it (tests/pg_server.sh). CKPT and
# UNET_CKPT: the checkpoints to score (default: lenet --epochs 1 and unet --epochs 1 --scenes 512
# train them). Needs postgresql-15 and postgresql-server-dev-15 (skipped without). Never part of
# make test. Run it with the machine to itself: flock /tmp/ddl-cpu.lock make bench BENCH_ONLY=pg_batch
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
ROWS=${ROWS:-50000}
UNET_ROWS=${UNET_ROWS:-2000}
ARRAY_ROWS=${ARRAY_ROWS:-1000}
BATCH_SIZES=${BATCH_SIZES:-64}
DATA=/usr/share/datasets/fashion-mnist
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/../../tests/pg_server.sh"
PYTHON=python3
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
skip() { echo "   skipped: $*"; exit 0; }

echo "== PostgreSQL, many rows per call: ddl_predict_batch against ddl_predict (LeNet, $ROWS rows), ddl_segment_batch"
echo "   against ddl_segment (U-Net 64x64, $UNET_ROWS rows); arrays of $ARRAY_ROWS rows, 1 backend, no parallel workers;"
echo "   ddl.batch_size $BATCH_SIZES; $REPEAT alternated runs"
# ---- what it needs ----
[ -f "$(pg_config --pgxs 2>/dev/null)" ] || skip "no pg_config with PGXS (Debian: postgresql-15 postgresql-server-dev-15)"
pg_server_need || skip "$PG_WHY"
[ -d "$DATA" ] || skip "no $DATA"
[ -w "$(pg_config --pkglibdir)" ] || skip "cannot install the extension into $(pg_config --pkglibdir) as $(id -un)"
make -s pg-install BUILD="$BUILD" > /dev/null || { echo "   pg_batch.sh: make pg-install failed"; exit 1; }

# ---- a server of its own ----
tmp=$(mktemp -d) || exit 1
M=$tmp/models
trap 'pg_server_stop "$tmp"; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
pg_server_init "$tmp" "shared_buffers = 128MB
max_parallel_workers_per_gather = 0
ddl.model_dir = '$M'" || { echo "   pg_batch.sh: initdb failed"; exit 1; }
pg_server_start "$tmp" || { echo "   pg_batch.sh: pg_ctl start failed"; exit 1; }
mkdir "$M"
sql() { $AS "$PGBIN/psql" -h "$tmp" -U postgres -d ddl -X -q -At -v ON_ERROR_STOP=1 "$@"; }
$AS "$PGBIN/createdb" -h "$tmp" -U postgres ddl && sql -c "CREATE EXTENSION ddl" || exit 1

# ---- the models and the tables ----
if [ -n "${CKPT:-}" ]; then cp "$CKPT" "$M/lenet.ddl" || exit 1
else "$BUILD/bin/lenet" --epochs 1 --quiet --data "$DATA" --save "$M/lenet.ddl" > /dev/null || exit 1; fi
if [ -n "${UNET_CKPT:-}" ]; then cp "$UNET_CKPT" "$M/unet.ddl" || exit 1
else "$BUILD/bin/unet" --epochs 1 --scenes 512 --test-scenes 32 --quiet --data "$DATA" --save "$M/unet.ddl" > /dev/null || exit 1; fi
chmod 755 "$M" && chmod 644 "$M"/*
"$PYTHON" - "$DATA" "$tmp/images.copy" <<'PY' || exit 1
import gzip, sys
px = gzip.open(sys.argv[1] + "/t10k-images-idx3-ubyte.gz").read()[16:]
with open(sys.argv[2], "w") as f:
    for i in range(10000):
        f.write("%d\t\\\\x%s\n" % (i, px[i * 784:(i + 1) * 784].hex()))
PY
# a 64 x 64 scene: 4096 bytes of 6 consecutive test images, rotated by the row's id
sql -c "CREATE TABLE test10k (id int PRIMARY KEY, img bytea)" -c "COPY test10k FROM '$tmp/images.copy'" \
    -c "CREATE TABLE images (id int PRIMARY KEY, img bytea)" \
    -c "INSERT INTO images SELECT r * 10000 + t.id, t.img FROM test10k t, generate_series(0, ($ROWS - 1) / 10000) r
        WHERE r * 10000 + t.id < $ROWS" \
    -c "CREATE TABLE scenes (id int PRIMARY KEY, img bytea)" \
    -c "INSERT INTO scenes SELECT g, substr((SELECT string_agg(img, ''::bytea ORDER BY id) FROM test10k
        WHERE id BETWEEN g % 9990 AND g % 9990 + 5), 1 + g % 607, 4096) FROM generate_series(0, $UNET_ROWS - 1) g" \
    -c "VACUUM ANALYZE" || exit 1
[ "$(sql -c "SELECT count(*) FROM images")" = "$ROWS" ] && [ "$(sql -c "SELECT count(*) FROM scenes WHERE length(img) = 4096")" = "$UNET_ROWS" ] ||
    { echo "   pg_batch.sh: the tables did not load"; exit 1; }

# ---- the two forms give the same bits ----
set -- $(sql -F' ' <<EOF
WITH b AS (SELECT unnest(array_agg(id)) AS id, ddl_predict_proba_batch('lenet.ddl', array_agg(img)) AS p
           FROM test10k GROUP BY id / $ARRAY_ROWS)
SELECT count(*) FILTER (WHERE p = ddl_predict_proba('lenet.ddl', img)) FROM b JOIN test10k USING (id);
WITH b AS (SELECT unnest(array_agg(id)) AS id, ddl_segment_batch('unet.ddl', array_agg(img)) AS m
           FROM scenes WHERE id < 500 GROUP BY id / 100)
SELECT count(*) FILTER (WHERE m = ddl_segment('unet.ddl', img)) FROM b JOIN scenes USING (id);
EOF
)
u=$((UNET_ROWS < 500 ? UNET_ROWS : 500))
echo "   the same bits: LeNet's probabilities on ${1:-0} of 10000 images, U-Net's masks on ${2:-0} of $u scenes"
[ "${1:-0}" = 10000 ] && [ "${2:-0}" = "$u" ] || { echo "   pg_batch.sh: the _batch functions differ from the row functions"; exit 1; }

# ---- memory a backend holds per model ----
# mem TABLE MODEL ROW_FN BATCH_FN BS: "rss0 rss1 rss2 ctx1 ctx2" (KiB, KiB, KiB, bytes, bytes) of a
# fresh backend: at the start, after ROW_FN on one row, after BATCH_FN on an array of 100
mem() {
    sql <<EOF | awk '/^VmRSS:/ { r[++n] = $2 } /^[0-9]+$/ { c[++m] = $1 } END { printf "%s %s %s %s %s\n", r[1], r[2], r[3], c[1], c[2] }'
SELECT pg_backend_pid() AS pid \\gset
\\setenv BPID :pid
LOAD 'ddl';
SET ddl.batch_size = $5;
\\! grep VmRSS /proc/\$BPID/status
SELECT $3('$2', img) FROM $1 WHERE id = 0 \\g /dev/null
\\! grep VmRSS /proc/\$BPID/status
SELECT sum(total_bytes) FROM pg_backend_memory_contexts WHERE name = 'ddl models';
SELECT $4('$2', array_agg(img)) FROM $1 WHERE id < 100 \\g /dev/null
\\! grep VmRSS /proc/\$BPID/status
SELECT sum(total_bytes) FROM pg_backend_memory_contexts WHERE name = 'ddl models';
EOF
}
kb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
for bs in $BATCH_SIZES; do
    for m in lenet unet; do
        if [ $m = lenet ]; then set -- $(mem images lenet.ddl ddl_predict ddl_predict_batch "$bs")
        else set -- $(mem scenes unet.ddl ddl_segment ddl_segment_batch "$bs"); fi
        echo "   memory, $m, ddl.batch_size $bs: backend VmRSS $(kb "$1") MiB at start, $(kb "$2") after its first row" \
             "(+$(kb $(($2 - $1)))), $(kb "$3") after its first array (+$(kb $(($3 - $2)))); 'ddl models' context" \
             "$(mb "$4") MiB, then $(mb "$5") MiB"
        record "PostgreSQL, $m: memory per model, MiB ('ddl models' context: row functions / + batch of $bs)" \
            "$(mb "$4") / $(mb "$5")" "backend VmRSS growth" "$(kb $(($2 - $1))) / $(kb $(($3 - $1)))" "-" "-"
    done
done

# ---- timed: one session per run, its model loaded and a pass of each form run first ----
# run WARM QUERY BS: "ms cpu_ms" of QUERY in a fresh backend, after the statements WARM: the time
# it took, and the CPU time the backend used meanwhile (utime + stime, /proc/PID/stat), which a
# machine shared with other work disturbs far less
run() {
    sql <<EOF | awk -v hz="$(getconf CLK_TCK)" '/^Time: / { t = $2 } /^cpu/ { c[$1] = $2 }
        END { printf "%s %.0f\n", t, (c["cpu1"] - c["cpu0"]) * 1000 / hz }'
SET ddl.batch_size = $3;
$1
SELECT pg_backend_pid() AS pid \\gset
\\setenv BPID :pid
\\! awk '{ print "cpu0", \$14 + \$15 }' /proc/\$BPID/stat
\\timing on
$2;
\\timing off
\\! awk '{ print "cpu1", \$14 + \$15 }' /proc/\$BPID/stat
EOF
}
rate() { awk -v n="$1" -v t="${2:-0}" 'BEGIN { if (t > 0) printf "%.0f", n / t * 1000 }'; }
for bs in $BATCH_SIZES; do
    for m in lenet unet; do
        if [ $m = lenet ]; then
            N=$ROWS
            warm="SELECT count(ddl_predict('lenet.ddl', img)) FROM images WHERE id < 64 \\g /dev/null
SELECT count(*) FROM (SELECT ddl_predict_batch('lenet.ddl', array_agg(img)) FROM images WHERE id < 64) b \\g /dev/null"
            row="SELECT sum(ddl_predict('lenet.ddl', img)) FROM images"
            batch="SELECT sum(c) FROM (SELECT ddl_predict_batch('lenet.ddl', array_agg(img)) AS c FROM images GROUP BY id / $ARRAY_ROWS) b"
        else
            N=$UNET_ROWS
            warm="SELECT count(ddl_segment('unet.ddl', img)) FROM scenes WHERE id < 64 \\g /dev/null
SELECT count(*) FROM (SELECT ddl_segment_batch('unet.ddl', array_agg(img)) FROM scenes WHERE id < 64) b \\g /dev/null"
            row="SELECT sum(length(ddl_segment('unet.ddl', img))) FROM scenes"
            batch="SELECT sum(length(c)) FROM (SELECT ddl_segment_batch('unet.ddl', array_agg(img)) AS c FROM scenes GROUP BY id / $ARRAY_ROWS) b"
        fi
        : > "$tmp/row"; : > "$tmp/batch"; : > "$tmp/ratio"; : > "$tmp/crow"; : > "$tmp/cbatch"
        r=1
        while [ "$r" -le "$REPEAT" ]; do
            set -- $(run "$warm" "$row" "$bs") $(run "$warm" "$batch" "$bs")
            a=$(rate "$N" "${1:-}"); b=$(rate "$N" "${3:-}"); ca=$(rate "$N" "${2:-}"); cb=$(rate "$N" "${4:-}")
            echo "   $m, ddl.batch_size $bs, run $r: row by row $a rows/s, arrays $b rows/s ($(ratio "$b" "$a")x);" \
                 "per CPU second of the backend $ca and $cb ($(ratio "$cb" "$ca")x)"
            [ -n "$a" ] && echo "$a" >> "$tmp/row"; [ -n "$b" ] && echo "$b" >> "$tmp/batch"
            [ -n "$a" ] && [ -n "$b" ] && ratio "$b" "$a" >> "$tmp/ratio" && echo >> "$tmp/ratio"
            [ -n "$ca" ] && echo "$ca" >> "$tmp/crow"; [ -n "$cb" ] && echo "$cb" >> "$tmp/cbatch"
            r=$((r + 1))
        done
        # the median of each run's ratio (the two forms of a run ran back to back, so a machine that
        # slows down for a while slows both) beside the ratio of the medians; and rows per CPU second
        a=$(median < "$tmp/row"); b=$(median < "$tmp/batch"); q=$(median < "$tmp/ratio")
        ca=$(median < "$tmp/crow"); cb=$(median < "$tmp/cbatch")
        echo "pg_batch_$m: batch_size=$bs row_rows_per_sec=$a batch_rows_per_sec=$b ratio=$(ratio "$b" "$a") run_ratio=$q" \
             "row_rows_per_cpu_sec=$ca batch_rows_per_cpu_sec=$cb cpu_ratio=$(ratio "$cb" "$ca")"
        record "PostgreSQL, $m rows/s: arrays of $ARRAY_ROWS, ddl.batch_size $bs ($N rows; median run ratio $q)" "$b" \
            "row by row" "$a" "$(ratio "$b" "$a")" "-"
        record "PostgreSQL, $m rows per CPU second of the backend: the same" "$cb" "row by row" "$ca" "$(ratio "$cb" "$ca")" "-"
    done
done
