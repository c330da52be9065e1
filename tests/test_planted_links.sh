#!/bin/sh
# test_planted_links.sh - output files where another user could plant links (two uids: we are
# root, the attacker is nobody). ddlrun --log-dir and ddl-sweep --out refuse a directory the
# attacker owns, a directory of ours writable by everyone without the sticky bit, and a
# --log-dir that is the attacker's symlink, each exiting non-zero with a message naming the
# path; in a sticky directory of ours (as /tmp is) a planted rank.N.log symlink is replaced, not
# followed, and a planted results.csv symlink or symlinked trial directory is refused. In every
# case the victim's file keeps its bytes.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
B=$BUILD/bin
if [ "$(id -u)" != 0 ] || ! command -v setpriv > /dev/null; then
    echo "skipped: needs root and setpriv (util-linux) to act as a second user"; echo "0 passed, 0 failed"; exit 0
fi
export OPENBLAS_NUM_THREADS=1 FAKE_SLEEP=0.02
base=$(mktemp -d) || exit 1
trap 'rm -rf "$base"' EXIT
chmod 755 "$base"
mkdir -m 700 "$base/victim" && echo precious > "$base/victim/secret" && echo "a log of ours" > "$base/victim/output.log"
sum0=$(cat "$base/victim/secret" "$base/victim/output.log" | cksum)
untouched() { [ "$(cat "$base/victim/secret" "$base/victim/output.log" | cksum)" = "$sum0" ]; }
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
mkdir -m 1777 "$base/pub"      # as /tmp: anyone may create, nobody may replace another's entries
mkdir -m 777 "$base/open"      # a mistake of ours: writable by all, no sticky bit
RANKS="sh -c 'echo rank \$DDL_RANK of \$DDL_WORLD_SIZE'"

# ---- ddlrun --log-dir ----
# run_ddlrun NAME DIR: ddlrun -n 2 --log-dir DIR, its stderr in $base/NAME.err; sets $rc
run_ddlrun() { eval "\"$B/ddlrun\" -n 2 --log-dir \"$2\" -- $RANKS" > /dev/null 2> "$base/$1.err"; rc=$?; }
as_nobody mkdir "$base/pub/theirs" && as_nobody ln -s "$base/victim/secret" "$base/pub/theirs/rank.0.log"
check "the attacker plants rank.0.log in a directory of theirs" $?
run_ddlrun theirs "$base/pub/theirs"
[ $rc -ne 0 ] && grep -q "ddlrun: --log-dir: $base/pub/theirs belongs to uid 65534" "$base/theirs.err" && untouched
check "--log-dir owned by another user: refused (exit $rc: $(head -n 1 "$base/theirs.err")), the victim untouched" $?
as_nobody ln -s "$base/victim/secret" "$base/open/rank.0.log"
run_ddlrun open "$base/open"
[ $rc -ne 0 ] && grep -q "$base/open is writable by every user (mode 0777) without the sticky bit" "$base/open.err" && untouched
check "--log-dir of mode 0777: refused (exit $rc), the victim untouched" $?
as_nobody ln -s "$base/victim" "$base/pub/logs-link"
run_ddlrun link "$base/pub/logs-link"
[ $rc -ne 0 ] && grep -q "$base/pub/logs-link is a symbolic link of uid 65534" "$base/link.err" && untouched &&
    [ ! -e "$base/victim/rank.0.log" ]
check "--log-dir a symlink of another user's: refused (exit $rc), nothing written behind it" $?
mkdir -m 1777 "$base/pub/sticky"
as_nobody ln -s "$base/victim/secret" "$base/pub/sticky/rank.0.log" && as_nobody ln -s "$base/victim/output.log" "$base/pub/sticky/rank.1.log"
run_ddlrun sticky "$base/pub/sticky"
[ $rc -eq 0 ] && untouched && [ ! -L "$base/pub/sticky/rank.0.log" ] && [ ! -L "$base/pub/sticky/rank.1.log" ] &&
    grep -q "rank 0 of 2" "$base/pub/sticky/rank.0.log" && grep -q "rank 1 of 2" "$base/pub/sticky/rank.1.log"
check "a sticky --log-dir of ours with planted rank.N.log links: replaced, not followed (exit $rc), the victim untouched" $?
mkdir "$base/mine"
run_ddlrun mine "$base/mine"
[ $rc -eq 0 ] && grep -q "rank 1 of 2" "$base/mine/rank.1.log"; check "--log-dir of ours: the logs" $?

# ---- ddl-sweep --out ----
# run_sweep NAME DIR [FLAGS]: a one-trial sweep into DIR, its output in $base/NAME.err; sets $rc
run_sweep() {
    n=$1 d=$2; shift 2
    "$B/ddl-sweep" --grid lr=0.01 --slots 1 --out "$d" "$@" -- tests/sweep_fake.sh --epochs 1 > "$base/$n.err" 2>&1; rc=$?
}
as_nobody mkdir "$base/pub/sweep-theirs" && as_nobody ln -s "$base/victim/secret" "$base/pub/sweep-theirs/results.csv"
run_sweep s-theirs "$base/pub/sweep-theirs"
[ $rc -ne 0 ] && grep -q "ddl-sweep: --out: $base/pub/sweep-theirs belongs to uid 65534" "$base/s-theirs.err" && untouched
check "--out owned by another user: refused (exit $rc: $(head -n 1 "$base/s-theirs.err")), the victim untouched" $?
mkdir -m 777 "$base/sweep-open" && chmod 777 "$base/sweep-open"
as_nobody ln -s "$base/victim/secret" "$base/sweep-open/results.csv"
run_sweep s-open "$base/sweep-open"
[ $rc -ne 0 ] && grep -q "$base/sweep-open is writable by every user (mode 0777)" "$base/s-open.err" && untouched
check "--out of mode 0777: refused (exit $rc), the victim untouched" $?
mkdir -m 1777 "$base/pub/s1" && chmod 1777 "$base/pub/s1"
as_nobody ln -s "$base/victim/secret" "$base/pub/s1/results.csv"
run_sweep s1 "$base/pub/s1"
[ $rc -ne 0 ] && grep -q "$base/pub/s1/results.csv is a symbolic link: not followed" "$base/s1.err" && untouched
check "a planted results.csv symlink: refused (exit $rc), the victim untouched" $?
run_sweep s1r "$base/pub/s1" --resume
[ $rc -ne 0 ] && grep -q "$base/pub/s1/results.csv is a symbolic link" "$base/s1r.err" && untouched
check "... and with --resume (exit $rc)" $?
mkdir -m 1777 "$base/pub/s2" && chmod 1777 "$base/pub/s2"
as_nobody ln -s "$base/victim" "$base/pub/s2/trial-0000"
run_sweep s2 "$base/pub/s2"
[ $rc -ne 0 ] && grep -q "trial 0: $base/pub/s2/trial-0000 is a symbolic link: not followed" "$base/s2.err" && untouched &&
    [ ! -e "$base/victim/logs" ]
check "a symlinked trial directory: refused (exit $rc: $(grep 'trial 0' "$base/s2.err" | head -n 1)), the victim untouched" $?
mkdir -m 1777 "$base/pub/s3" && chmod 1777 "$base/pub/s3"
as_nobody mkdir "$base/pub/s3/trial-0000" && as_nobody ln -s "$base/victim/output.log" "$base/pub/s3/trial-0000/output.log"
run_sweep s3 "$base/pub/s3"
[ $rc -ne 0 ] && grep -q "trial 0: $base/pub/s3/trial-0000 belongs to uid 65534" "$base/s3.err" && untouched
check "a trial directory of another user's: refused (exit $rc), the victim untouched" $?
mkdir -m 1777 "$base/pub/s4" && chmod 1777 "$base/pub/s4"
run_sweep s4 "$base/pub/s4"
[ $rc -eq 0 ] && [ "$(tail -n +2 "$base/pub/s4/results.csv" | grep -c ,ok,)" = 1 ] && grep -q '^epoch 1/1' "$base/pub/s4/trial-0000/output.log"
check "a sweep in a sticky directory of ours, nothing planted: runs (exit $rc)" $?
run_sweep s4r "$base/pub/s4" --resume
[ $rc -eq 0 ] && grep -q 'already in' "$base/s4r.err"; check "... and --resume finds its trial there (exit $rc)" $?

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
