#!/bin/sh
# test_sweep.sh - ddl-sweep (issue 16) on tests/sweep_fake.sh, a stand-in program whose test_acc
# is a fixed function of --lr and --batch (best: lr 0.01, batch 64), and one short real lenet run:
# a grid's sorted table and results.csv; seeded random draws and a --space file giving the same
# trials; bad command lines; a trial killed from outside retried on the other slot; a failing
# slot blacklisted; a usage error not retried; a timeout; ASHA against the full grid; Ctrl-C
# leaving no process, then --resume running only what is missing; --list and --run-index;
# --slots-hosts through ddlrun -H.
# ddl-test: idle (mostly waits (timeouts, heartbeats, stopped ranks), bounds in seconds: four run at a time)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
SWEEP=$BUILD/bin/ddl-sweep
FAKE=tests/sweep_fake.sh
DATA=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d)
sweep_pid=""
trap '[ -n "$sweep_pid" ] && kill -9 "$sweep_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 FAKE_SLEEP=0.02
rows() { tail -n +2 "$1" | grep -c .; }        # data rows of a results.csv
col() { tail -n +2 "$1" | cut -d, -f"$2"; }      # one column of its rows
GRID4="--grid lr=0.001,0.01 --grid batch=32,64"

# ---- a 4-trial grid on 2 slots: results.csv, the sorted table, the best command line ----
"$SWEEP" $GRID4 --slots 2 --out "$tmp/g" -- $FAKE --epochs 2 > "$tmp/g.out" 2>&1; rc=$?
best=$(grep -A1 '^trial ' "$tmp/g.out" | tail -n 1 | awk '{print $1}')
order=$(sed -n '/^trial /,/^trial-epochs/p' "$tmp/g.out" | awk 'NR > 1 && $4 + 0 > 0 {print $4}' | tr '\n' ' ')
echo "grid: exit $rc, $(rows "$tmp/g/results.csv") rows, table order by test_acc: $order"
[ "$rc" -eq 0 ] && [ "$(rows "$tmp/g/results.csv")" -eq 4 ] && [ "$best" = 3 ] && ok ||
    { bad "4-trial grid: exit $rc, best '$best'"; cat "$tmp/g.out"; }
[ "$(head -n 1 "$tmp/g/results.csv")" = "trial,lr,batch,test_acc,status,exit,wall_s,epochs,slot,attempts" ] &&
    [ "$(col "$tmp/g/results.csv" 1 | sort -n | tr '\n' ' ')" = "0 1 2 3 " ] && ok || bad "results.csv: header or rows"
[ "$order" = "$(echo "$order" | tr ' ' '\n' | grep . | sort -rn | tr '\n' ' ')" ] && ok || bad "table not sorted: $order"
grep -q "^best: trial 3, test_acc=0.6000 (lr=0.01 batch=64):" "$tmp/g.out" &&
    grep -q "ddlrun -n 1 -- tests/sweep_fake.sh --epochs 2 --lr 0.01 --batch 64 --logdir $tmp/g/trial-0003/logs" "$tmp/g.out" &&
    grep -q '^epoch 2/2' "$tmp/g/trial-0003/output.log" && ok || bad "best line or trial directory"
grep -q '\[4/4 done, 0 running, 0 failed\]' "$tmp/g.out" && ok || bad "no progress line"

# ---- random search: seeded, reproducible; --space in SageMaker's shape draws the same ----
R="--random 6 --range lr=1e-4:1e-1:log --range batch=16:128:int"
"$SWEEP" $R --seed 7 --list --out "$tmp/r" -- $FAKE > "$tmp/r1"
"$SWEEP" $R --seed 7 --list --out "$tmp/r" -- $FAKE > "$tmp/r2"
"$SWEEP" $R --seed 8 --list --out "$tmp/r" -- $FAKE > "$tmp/r3"
cat > "$tmp/space.json" <<'EOF'
{ "Strategy": "Random", "ResourceLimits": {"MaxNumberOfTrainingJobs": 6},
  "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": "test_acc"},
  "ParameterRanges": {
    "ContinuousParameterRanges": [{"Name": "lr", "MinValue": "0.0001", "MaxValue": "0.1", "ScalingType": "Logarithmic"}],
    "IntegerParameterRanges": [{"Name": "batch", "MinValue": 16, "MaxValue": 128, "ScalingType": "Linear"}] } }
EOF
"$SWEEP" --space "$tmp/space.json" --seed 7 --list --out "$tmp/r" -- $FAKE > "$tmp/r4"
inside=$(sed 's/.*--lr \([^ ]*\) --batch \([^ ]*\) .*/\1 \2/' "$tmp/r1" |
    awk '$1 >= 0.0001 && $1 <= 0.1 && $2 >= 16 && $2 <= 128 && $2 == int($2)' | wc -l)
echo "random: $(wc -l < "$tmp/r1") trials, $inside within the ranges; first: $(head -n 1 "$tmp/r1" | sed 's/.* -- //')"
[ "$(wc -l < "$tmp/r1")" -eq 6 ] && [ "$inside" -eq 6 ] && cmp -s "$tmp/r1" "$tmp/r2" && ! cmp -s "$tmp/r1" "$tmp/r3" &&
    ok || bad "random search: not 6 trials in range, or not reproducible, or the seed changes nothing"
cmp -s "$tmp/r1" "$tmp/r4" && ok || { bad "--space draws other trials than the same flags"; diff "$tmp/r1" "$tmp/r4"; }
printf '{"ParameterRanges": {"CategoricalParameterRanges": [{"Name": "lr", "Values": ["0.01", "0.1"]},\n {"Name": "batch", "Values": [32, 64, 128]}]}}\n' > "$tmp/grid.json"
"$SWEEP" --space "$tmp/grid.json" --list --bare --out "$tmp/r" -- $FAKE > "$tmp/r5"
[ "$(wc -l < "$tmp/r5")" -eq 6 ] && [ "$(sed -n 6p "$tmp/r5" | sed 's/.* -- //')" = "tests/sweep_fake.sh --lr 0.1 --batch 128" ] &&
    ok || { bad "--space grid of categorical ranges"; cat "$tmp/r5"; }

# ---- bad command lines: one clear line, exit 2 ----
badarg() { # badarg EXPECTED-TEXT ARGS...
    want=$1; shift
    "$SWEEP" "$@" > "$tmp/e" 2>&1; rc=$?
    [ "$rc" -eq 2 ] && grep -q -- "$want" "$tmp/e" && ok || { bad "ddl-sweep $*: exit $rc, wanted '$want'"; cat "$tmp/e"; }
}
badarg "--out DIR is required" --grid lr=1,2 -- $FAKE
badarg "no PROGRAM to run" --grid lr=1,2 --out "$tmp/x"
badarg "nothing to search" --out "$tmp/x" -- $FAKE
badarg "expected NAME=V1,V2" --grid lr --out "$tmp/x" -- $FAKE
badarg "the first no larger" --random 2 --range lr=1:0 --out "$tmp/x" -- $FAKE
badarg "bounds above 0" --random 2 --range lr=0:1:log --out "$tmp/x" -- $FAKE
badarg "continuous range cannot be a grid" --range lr=0.1:1 --out "$tmp/x" -- $FAKE
badarg "is given twice" --grid lr=1,2 --grid lr=3 --out "$tmp/x" -- $FAKE
badarg "--asha 1: expected an integer from 2" --grid lr=1,2 --asha 1 --out "$tmp/x" -- $FAKE
badarg "unrecognized option '--bogus'" --bogus --out "$tmp/x" -- $FAKE
badarg "PROGRAM's arguments set --lr=0.5" --grid lr=1,2 --out "$tmp/x" -- $FAKE --lr=0.5
badarg "--run-index 9: the search has 4 trials" $GRID4 --run-index 9 --out "$tmp/x" -- $FAKE
badarg "results.csv exists: give --resume" $GRID4 --out "$tmp/g" -- $FAKE
badarg "No such file" --space "$tmp/none.json" --out "$tmp/x" -- $FAKE
printf '{"ParameterRanges": {"CategoricalParameterRanges": [{"Name": "lr", "Valus": [1]}]}}' > "$tmp/b1.json"
badarg 'unknown key "Valus"' --space "$tmp/b1.json" --out "$tmp/x" -- $FAKE
printf '{"ParameterRanges": {\n "CategoricalParameterRanges": [\n}' > "$tmp/b2.json"
badarg "syntax error at line 3, column [0-9]*" --space "$tmp/b2.json" --out "$tmp/x" -- $FAKE
printf '{"Strategy": "Bayesian", "ParameterRanges": {"CategoricalParameterRanges": [{"Name": "lr", "Values": [1]}]}}' > "$tmp/b3.json"
badarg "ddl-sweep does Grid or Random" --space "$tmp/b3.json" --out "$tmp/x" -- $FAKE

# ---- a trial killed from outside is retried on the other slot ----
mkdir -p "$tmp/pids"
FAKE_PIDS="$tmp/pids" FAKE_WAIT=0.5 "$SWEEP" $GRID4 --slots 2 --out "$tmp/k" -- $FAKE > "$tmp/k.out" 2>&1 &
sweep_pid=$!
i=0; while [ ! -s "$tmp/pids/trial-1.attempt-0" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
kill -9 "$(cat "$tmp/pids/trial-1.attempt-0")"
wait "$sweep_pid"; rc=$?; sweep_pid=""
was=$(sed -n 's/.*trial 1 exited with code 137 on slot \([0-9]\): .*killed by signal 9.*; retrying (1 of 1)$/\1/p' "$tmp/k.out")
row=$(grep '^1,' "$tmp/k/results.csv")
echo "killed trial 1 on slot $was: exit $rc, its row: $row"
[ "$rc" -eq 0 ] && [ -n "$was" ] && [ "$(echo "$row" | cut -d, -f5,9,10)" = "ok,$((1 - was)),2" ] &&
    [ "$(rows "$tmp/k/results.csv")" -eq 4 ] && ok || { bad "a killed trial was not retried on the other slot"; cat "$tmp/k.out"; }

# ---- a slot on which every trial fails is blacklisted; the rest finish on the other ----
FAKE_FAIL_SLOT=1 "$SWEEP" $GRID4 --slots 2 --retries 2 --blacklist-after 2 --out "$tmp/b" -- $FAKE > "$tmp/b.out" 2>&1; rc=$?
echo "slot 1 fails: exit $rc; $(grep blacklisted "$tmp/b.out")"
[ "$rc" -eq 0 ] && [ "$(grep -c blacklisted "$tmp/b.out")" -eq 1 ] &&
    grep -q "^ddl-sweep: slot 1 blacklisted: 2 trials in a row failed on it; going on with 1 slot$" "$tmp/b.out" &&
    [ "$(col "$tmp/b/results.csv" 5,9 | sort -u)" = "ok,0" ] && [ "$(rows "$tmp/b/results.csv")" -eq 4 ] && ok ||
    { bad "blacklisting slot 1"; cat "$tmp/b.out"; }
FAKE_FAIL_SLOT=0 "$SWEEP" $GRID4 --slots 1 --blacklist-after 1 --out "$tmp/b0" -- $FAKE > "$tmp/b0.out" 2>&1; rc=$?
[ "$rc" -eq 1 ] && grep -q "every slot is blacklisted; 4 trials not run" "$tmp/b0.out" && ok ||
    { bad "no slot left: exit $rc"; cat "$tmp/b0.out"; }

# ---- a usage error (exit 2) is not retried; a hanging trial times out ----
"$SWEEP" --grid lr=0.01,oops --retries 3 --slots 2 --out "$tmp/u" -- $FAKE > "$tmp/u.out" 2>&1; rc=$?
[ "$rc" -eq 1 ] && [ "$(grep '^1,' "$tmp/u/results.csv" | cut -d, -f4,5,9)" = "usage,2,1" ] &&
    [ "$(grep -c '^==== ddl-sweep' "$tmp/u/trial-0001/output.log")" -eq 1 ] &&
    grep -q "trial 1: usage error (exit 2), not retried: fake: 'oops': expected a number" "$tmp/u.out" && ok ||
    { bad "usage error: exit $rc"; cat "$tmp/u.out"; }
t0=$(date +%s%3N)
FAKE_HANG_TRIAL=0 "$SWEEP" --grid lr=0.01,0.1 --retries 0 --timeout 1 --slots 2 --out "$tmp/t" -- $FAKE > "$tmp/t.out" 2>&1; rc=$?
t1=$(date +%s%3N)
[ "$rc" -eq 1 ] && [ $((t1 - t0)) -lt 5000 ] && grep -q "trial 0 timed out on slot 0" "$tmp/t.out" &&
    [ "$(grep '^0,' "$tmp/t/results.csv" | cut -d, -f3)" = "" ] && [ "$(col "$tmp/t/results.csv" 4 | sort | tr '\n' ' ')" = "failed ok " ] &&
    ok || { bad "--timeout: exit $rc in $((t1 - t0)) ms"; cat "$tmp/t.out"; }

# ---- ASHA finds the full grid's best trial in fewer trial-epochs ----
GRID16="--grid lr=0.0001,0.001,0.01,0.1 --grid batch=16,32,64,128"
"$SWEEP" $GRID16 --slots 2 --out "$tmp/full" -- $FAKE --epochs 9 > "$tmp/full.out" 2>&1; rc1=$?
"$SWEEP" $GRID16 --slots 2 --asha 3 --out "$tmp/asha" -- $FAKE --epochs 9 > "$tmp/asha.out" 2>&1; rc2=$?
b1=$(sed -n 's/^best: trial \([0-9]*\),.*/\1/p' "$tmp/full.out"); b2=$(sed -n 's/^best: trial \([0-9]*\),.*/\1/p' "$tmp/asha.out")
e1=$(sed -n 's/^trial-epochs run: //p' "$tmp/full.out"); e2=$(sed -n 's/^trial-epochs run: //p' "$tmp/asha.out")
stopped=$(col "$tmp/asha/results.csv" 5 | grep -c stopped)
echo "ASHA (eta 3, 16 trials x 9 epochs): best trial $b2 (full grid: $b1), $e2 trial-epochs (full grid: $e1), $stopped stopped"
[ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] && [ "$b1" = 10 ] && [ "$b2" = "$b1" ] && [ "$e1" -eq 144 ] && [ "$e2" -lt "$e1" ] &&
    [ "$stopped" -ge 4 ] && grep -q ' stopped ' "$tmp/asha.out" && ok || { bad "ASHA"; tail -n 25 "$tmp/asha.out"; }

# ---- Ctrl-C: every trial stops, no process left; --resume runs only what is missing ----
mkdir -p "$tmp/pids2"
FAKE_PIDS="$tmp/pids2" FAKE_HANG_TRIAL=3 FAKE_SLEEP=0.1 "$SWEEP" $GRID4 --slots 2 --out "$tmp/c" -- $FAKE --epochs 3 \
    > "$tmp/c.out" 2>&1 &
sweep_pid=$!
i=0; while { [ ! -s "$tmp/c/results.csv" ] || [ "$(rows "$tmp/c/results.csv")" -lt 3 ] || [ ! -s "$tmp/pids2/trial-3.attempt-0" ]; } &&
    [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
kill -INT "$sweep_pid"
wait "$sweep_pid"; rc=$?; sweep_pid=""
sleep 0.3
left=""
for f in "$tmp"/pids2/*; do kill -0 "$(cat "$f")" 2>/dev/null && left="$left $(cat "$f")"; done
others=$(ps -eo pid,args | grep -F "$tmp/c/" | grep -v grep)
done_before=$(rows "$tmp/c/results.csv")
echo "Ctrl-C: exit $rc, $done_before rows kept, processes left: '${left}${others}'"
[ "$rc" -eq 130 ] && [ -z "$left" ] && [ -z "$others" ] && [ "$done_before" -eq 3 ] &&
    grep -q "with --resume to finish" "$tmp/c.out" && ok || { bad "Ctrl-C"; cat "$tmp/c.out"; }
"$SWEEP" $GRID4 --slots 2 --out "$tmp/c" --resume -- $FAKE --epochs 3 > "$tmp/c2.out" 2>&1; rc=$?
[ "$rc" -eq 0 ] && grep -q "3 trials already in $tmp/c/results.csv; 1 to run" "$tmp/c2.out" &&
    [ "$(grep -c 'started on slot' "$tmp/c2.out")" -eq 1 ] && grep -q "trial 3 started" "$tmp/c2.out" &&
    [ "$(col "$tmp/c/results.csv" 1 | sort -n | tr '\n' ' ')" = "0 1 2 3 " ] && grep -q "(earlier run)" "$tmp/c2.out" &&
    ok || { bad "--resume"; cat "$tmp/c2.out"; }

# ---- --run-index N: one trial, as a Slurm array task, into the same results format ----
"$SWEEP" $GRID4 --run-index 2 --out "$tmp/s" -- $FAKE > "$tmp/s.out" 2>&1; rc=$?
"$SWEEP" $GRID4 --run-index 2 --out "$tmp/s" -- $FAKE > "$tmp/s2.out" 2>&1; rc2=$?
"$SWEEP" $GRID4 --list --out "$tmp/s" -- $FAKE | sed -n 3p > "$tmp/line2"
[ "$rc" -eq 0 ] && [ "$rc2" -eq 0 ] && [ "$(rows "$tmp/s/results.csv")" -eq 1 ] &&
    [ "$(col "$tmp/s/results.csv" 1,2,3,5,9)" = "2,0.01,32,ok,$(hostname)" ] && grep -q "already in" "$tmp/s2.out" &&
    grep -q -- "-- tests/sweep_fake.sh --lr 0.01 --batch 32 --logdir $tmp/s/trial-0002/logs" "$tmp/line2" && ok ||
    { bad "--run-index"; cat "$tmp/s.out" "$tmp/s2.out"; }

# ---- --slots-hosts: each trial through ddlrun -H HOST:R (localhost: no ssh) ----
"$SWEEP" --grid lr=0.01,0.1 --slots-hosts localhost,localhost --ranks 2 --out "$tmp/h" -- $FAKE > "$tmp/h.out" 2>&1; rc=$?
[ "$rc" -eq 0 ] && [ "$(col "$tmp/h/results.csv" 4,8 | sort -u)" = "ok,localhost" ] &&
    grep -q "ddlrun -np 2 -H localhost:2 --master localhost:29516 " "$tmp/h/trial-0001/output.log" && ok ||
    { bad "--slots-hosts"; cat "$tmp/h.out"; }

# ---- real: lenet on 2 ranks, a short run; then Ctrl-C leaves no rank and no shared memory ----
if [ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ]; then
    "$SWEEP" --grid lr=0.01,0.05 --ranks 2 --out "$tmp/l" -- "$BUILD/bin/lenet" --train-limit 500 --epochs 1 \
        > "$tmp/l.out" 2>&1; rc=$?
    accs=$(col "$tmp/l/results.csv" 3 | tr '\n' ' ')
    echo "lenet: exit $rc, test_acc $accs"
    [ "$rc" -eq 0 ] && [ "$(col "$tmp/l/results.csv" 4 | sort -u)" = ok ] &&
        [ "$(col "$tmp/l/results.csv" 3 | awk '$1 > 0.1 && $1 < 1' | wc -l)" -eq 2 ] &&
        ls "$tmp"/l/trial-0001/logs/events.out.tfevents.* > /dev/null 2>&1 && [ -s "$tmp/l/trial-0001/checkpoint" ] &&
        grep -q "^epoch 1/1 .* test_acc" "$tmp/l/trial-0000/output.log" && ok || { bad "lenet sweep"; cat "$tmp/l.out"; }
    shm_before=$(ls /dev/shm | grep -c '^ddl-')
    "$SWEEP" --grid lr=0.01,0.05 --ranks 2 --slots 2 --out "$tmp/lc" -- "$BUILD/bin/lenet" --epochs 5 > "$tmp/lc.out" 2>&1 &
    sweep_pid=$!
    i=0; while ! grep -q '^ddl .*transport shm' "$tmp/lc/trial-0001/output.log" 2>/dev/null && [ $i -lt 300 ]; do
        sleep 0.05; i=$((i + 1)); done
    kill -INT "$sweep_pid"
    wait "$sweep_pid"; rc=$?; sweep_pid=""
    sleep 0.3
    others=$(ps -eo pid,args | grep -F "$tmp/lc/" | grep -v grep)
    shm_after=$(ls /dev/shm | grep -c '^ddl-')
    echo "Ctrl-C during lenet: exit $rc, processes left: '$others', ddl shared memory segments $shm_before -> $shm_after"
    [ "$rc" -eq 130 ] && [ -z "$others" ] && [ "$shm_after" -le "$shm_before" ] && ok || { bad "Ctrl-C of lenet trials"; cat "$tmp/lc.out"; }
else
    echo "skipped: the lenet runs (no Fashion-MNIST in $DATA)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
