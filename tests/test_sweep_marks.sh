#!/bin/sh
# test_sweep_marks.sh - ddl-sweep's results.csv and summary (issue 35, item 8), on
# tests/sweep_fake.sh: a trial whose loss is NaN and one whose test_acc is at chance (0.11 for 10
# classes) have the status "diverged" in results.csv and the table, are listed as diverged, rank
# after the ok trials and are never the best; --resume reads "diverged" back; --classes sets
# chance. A parameter named like a column of results.csv (epochs) gets the column param/epochs,
# a metric so named (wall_s) metric/wall_s: every column name is unique, and the search says so.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
SWEEP=$BUILD/bin/ddl-sweep
FAKE=tests/sweep_fake.sh
[ -x "$SWEEP" ] || { echo "skipped: no $SWEEP"; echo "0 passed, 0 failed"; exit 0; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export FAKE_SLEEP=0.01
col() { tail -n +2 "$1" | sort -n | cut -d, -f"$2" | tr '\n' ' '; }   # one column of the rows, by trial

# ---- diverged trials: lr 1 gives NaN losses, lr 0.5 accuracy at chance ----
FAKE_NAN_LR=1 FAKE_CHANCE_LR=0.5 "$SWEEP" --grid lr=0.01,1,0.5,0.001 --slots 2 --out "$tmp/d" -- $FAKE --epochs 2 \
    > "$tmp/d.out" 2>&1; rc=$?
cat "$tmp/d.out"
[ $rc = 0 ] && [ "$(col "$tmp/d/results.csv" 4)" = "ok diverged diverged ok " ]
check "results.csv: status diverged for the NaN trial and the one at chance, ok for the others (exit $rc)" $?
sed -n '/^trial /,/^trial-epochs/p' "$tmp/d.out" | grep -Eq '^1 +1 +0.1000 +diverged' &&
    sed -n '/^trial /,/^trial-epochs/p' "$tmp/d.out" | grep -Eq '^2 +0.5 +0.1100 +diverged'
check "the table shows them as diverged" $?
grep -q "^diverged (test accuracy at chance, or a loss NaN or infinite): trial 1, 2 (never the best)" "$tmp/d.out" &&
    grep -q "^best: trial 0, test_acc=" "$tmp/d.out"
check "the summary lists the diverged trials; the best is an ok one" $?
FAKE_NAN_LR=1 FAKE_CHANCE_LR=0.5 "$SWEEP" --grid lr=0.01,1,0.5,0.001 --out "$tmp/d" --resume -- $FAKE --epochs 2 \
    > "$tmp/d2.out" 2>&1
grep -q "4 trials already in" "$tmp/d2.out" && grep -q "^diverged (.*): trial 1, 2 " "$tmp/d2.out"
check "--resume reads the diverged status back" $?
"$SWEEP" --grid lr=0.01,0.5 --classes 2 --out "$tmp/c2" -- env FAKE_CHANCE_LR=0.5 $FAKE --epochs 1 > /dev/null 2>&1
[ "$(col "$tmp/c2/results.csv" 4)" = "diverged diverged " ]
check "--classes 2: chance is 0.52, so both trials (0.45, 0.11) are diverged" $?

# ---- a parameter named like a results column ----
"$SWEEP" --grid epochs=1,2 --grid lr=0.01 --out "$tmp/e" -- $FAKE > "$tmp/e.out" 2>&1; rc=$?
cat "$tmp/e.out"
[ $rc = 0 ] && [ "$(head -n 1 "$tmp/e/results.csv")" = "trial,param/epochs,lr,test_acc,status,exit,wall_s,epochs,slot,attempts" ]
check "--grid epochs=...: the parameter's column is param/epochs, the epochs run stay 'epochs' (exit $rc)" $?
[ "$(head -n 1 "$tmp/e/results.csv" | tr ',' '\n' | sort | uniq -d)" = "" ] && [ "$(col "$tmp/e/results.csv" 2)" = "1 2 " ] &&
    [ "$(col "$tmp/e/results.csv" 8)" = "1 2 " ]
check "every column name unique; the parameter's values under param/epochs, the epochs run under epochs" $?
grep -q "parameter epochs is column param/epochs of results.csv" "$tmp/e.out" && grep -Eq '^trial +param/epochs +lr' "$tmp/e.out"
check "the search says so, and its table uses the same name" $?
"$SWEEP" --grid lr=0.01 --metric wall_s --minimize --out "$tmp/w" -- $FAKE --epochs 1 > /dev/null 2>&1
[ "$(head -n 1 "$tmp/w/results.csv")" = "trial,lr,metric/wall_s,status,exit,wall_s,epochs,slot,attempts" ]
check "--metric wall_s: the metric's column is metric/wall_s" $?
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
