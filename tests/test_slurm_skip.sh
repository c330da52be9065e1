#!/bin/sh
# test_slurm_skip.sh - where slurmd cannot start (no cgroup filesystem, as in many containers),
# both real-Slurm tests skip the same way: "skipped: slurmd would not start: REASON", 0 checks,
# exit 0, and no daemon of theirs left running. Before, tests/test_slurm_nodes.sh went on and
# failed its checks (sinfo, srun) while tests/test_slurm_real.sh skipped. A slurmd on PATH that
# exits at once with slurmd's complaint stands for such a machine. Where a test skips earlier
# for another reason (not root, no Slurm or munge, no namespaces) there is nothing to compare.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
cat > "$tmp/bin/slurmd" <<'EOF'
#!/bin/sh
echo "slurmd: error: No filesystem mounted on /sys/fs/cgroup (simulated)" >&2
exit 1
EOF
chmod 755 "$tmp/bin/slurmd"
skipped=0
for t in test_slurm_real.sh test_slurm_nodes.sh; do
    before=" $(pgrep -x munged; pgrep -x slurmctld) "; before=$(echo "$before" | tr '\n' ' ')
    PATH="$tmp/bin:$PATH" timeout 120 sh "tests/$t" > "$tmp/$t.out" 2>&1; rc=$?
    echo "$t: exit $rc: $(grep -m 1 '^skipped:' "$tmp/$t.out")"
    if grep -q '^skipped:' "$tmp/$t.out" && ! grep -q '^skipped: slurmd would not start' "$tmp/$t.out"; then
        skipped=$((skipped + 1)); continue # skipped before slurmd: not this machine's case
    fi
    [ $rc -eq 0 ] && grep -q '^skipped: slurmd would not start: slurmd: error: No filesystem mounted' "$tmp/$t.out" &&
        [ "$(tail -n 1 "$tmp/$t.out")" = "0 passed, 0 failed" ] && ok ||
        { bad "$t did not skip where slurmd would not start"; tail -n 5 "$tmp/$t.out"; }
    # its munged and slurmctld are gone by the time it exits (tests/slurm.sh's slurm_stop waits for
    # them): none runs whose files (named on its command line) went with its temporary directory
    left=""
    for p in $(pgrep -x munged; pgrep -x slurmctld); do
        case "$before" in *" $p "*) continue ;; esac # not this test's
        f=$({ tr '\0' '\n' < "/proc/$p/cmdline"; } 2>/dev/null | grep -m 1 -E '/(munge\.key|slurm\.conf)$')
        [ -n "$f" ] && [ ! -e "$f" ] && left="$left $p"
    done
    [ -z "$left" ] && ok || { bad "$t left daemons running:$left"; kill $left 2>/dev/null; }
done
if [ $skipped -eq 2 ]; then
    echo "skipped: both tests skip before starting slurmd here"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
