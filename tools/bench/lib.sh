# lib.sh - what make bench's scripts share. Source it: . "$(dirname "$0")/lib.sh"
#   median            the median of the numbers on standard input ("-" when there are none)
#   field NAME        from standard input, the value of NAME= on the last line that has it
#   peak_rss FILE CMD...  runs CMD (its output unchanged) and writes its peak resident set size in
#                     MiB to FILE: the largest process of the command, so for ddlrun the largest rank
#   record WHAT DDL PEER_NAME PEER RATIO TARGET [DDL_RSS] [PEER_RSS]
#                     one row of the closing table, appended to $BENCH_RESULTS
#   print_table       the rows of $BENCH_RESULTS as one Markdown table
#   peer_ok NAME FIGURE LO HI  0 unless a peer made less than its usual figure alone (LO to HI);
#                     then a warning that the machine was busy, and 1: the caller repeats that run
#                     and does not report it (a slowed peer is no win)
#   pair_rate CMD...  runs CMD twice at once, two lone processes that exchange nothing, and prints
#                     the sum of their images_per_sec: what 2 ranks on these cores could reach if
#                     the exchange and the waiting for each other cost nothing
#   bench_tool NAME [LIBS...]  the path of tools/bench/NAME.c built into $BUILD/bench/NAME (again
#                     when the source or a library file named is newer), with the library's warnings
#                     ($BENCH_CFLAGS); the compiler's messages on standard error and status 1 when
#                     it cannot be built (tests/test_bench_tools.sh builds every tool with -Werror)
#   ddl_tool NAME [LIBS...]  as bench_tool, for a tool linked with $BUILD/libddl.a (lenet_ops, kernels)
#   cores_probe FILE  what the cores give right now (tools/bench/cores.c, built on first use): one
#                     "cores: ... ceiling=C" line appended to FILE and printed; then LeNet's step
#                     ops at 1 thread pinned to each vCPU in turn (lenet_ops.c), one "vcpus:" line
#   cores_record WHAT FILE  the table rows for the probes in FILE: both cores at once against one
#                     alone (medians), multiply-adds and memory reads: the ceilings of a 2-thread or
#                     2-rank speedup of compute-bound and of memory-bound work in that section; and
#                     1 MiB read by the other core than the one that wrote it, against the same one;
#                     and LeNet's step ops on the slower vCPU against the faster
#   resnet_rate TRAIN MODEL DATA PRECISION  ddl-train TRAIN's images/s on ResNet-18's ONNX export
#                     MODEL, 640 images of the folder DATA, in the second epoch (the first holds
#                     the first touch of every buffer)
# BENCH_RESULTS defaults to $BUILD/bench/results.tsv; bench.sh empties it when it starts.
BENCH_RESULTS=${BENCH_RESULTS:-${BUILD:-build}/bench/results.tsv}
export BENCH_RESULTS

median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" | tail -n 1; }
# ratio A B: A / B with two decimals, "-" when either is missing
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'; }

peak_rss() {
    out=$1; shift
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f '%M' -o "$out.kb" "$@"; rc=$?
        awk 'END { printf "%.0f\n", $1 / 1024 }' "$out.kb" > "$out"; rm -f "$out.kb"
    else
        "$@"; rc=$?; echo "-" > "$out"
    fi
    return $rc
}

pair_rate() {
    "$@" > /tmp/ddl-bench-pair.a 2>&1 & pid=$!
    "$@" > /tmp/ddl-bench-pair.b 2>&1; wait $pid
    a=$(field images_per_sec < /tmp/ddl-bench-pair.a); b=$(field images_per_sec < /tmp/ddl-bench-pair.b)
    awk -v a="$a" -v b="$b" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.0f\n", a + b }'
}

record() {
    mkdir -p "$(dirname "$BENCH_RESULTS")"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "${7:--}" "${8:--}" >> "$BENCH_RESULTS"
}

peer_ok() {
    # only a slowed peer is refused: one above its band makes ddl's ratio smaller, never a false win
    awk -v v="$2" -v lo="$3" 'BEGIN { exit !(v + 0 >= lo) }' && return 0
    echo "   warning: $1 made $2, below its usual $3 to $4 alone on these cores: the machine is busy; run repeated, not reported"
    return 1
}

print_table() {
    [ -s "$BENCH_RESULTS" ] || return 0
    echo "== summary (medians; ratio = ddl / peer for rates, peer / ddl for times; RSS = peak MiB per process)"
    echo "| what | ddl | peer | peer's figure | ratio | target | ddl RSS | peer RSS |"
    echo "|---|---|---|---|---|---|---|---|"
    awk -F '\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$BENCH_RESULTS"
}

BENCH_CFLAGS="-std=c11 -O2 -pthread -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes"
BENCH_DIR=${BENCH_DIR:-$(dirname "$0")} # where the tools' sources are: beside the script that sources this

bench_tool() {
    name=$1; shift
    src=$BENCH_DIR/$name.c bin=${BUILD:-build}/bench/$name stale=0
    { [ ! -x "$bin" ] || [ "$src" -nt "$bin" ] || [ "$BENCH_DIR/clock.h" -nt "$bin" ]; } && stale=1
    for a in "$@"; do [ -f "$a" ] && [ "$a" -nt "$bin" ] && stale=1; done # a library rebuilt since
    if [ $stale = 1 ]; then
        # shellcheck disable=SC2086 # BENCH_CFLAGS is a list of words
        mkdir -p "$(dirname "$bin")" && cc $BENCH_CFLAGS -I. -o "$bin" "$src" "$@" >&2 || return 1
    fi
    echo "$bin"
}

ddl_tool() {
    name=$1; shift
    libs=$(PKG_CONFIG_PATH="${BUILD:-build}" pkg-config --static --libs-only-other --libs-only-l --libs-only-L ddl |
        sed 's/-lddl//')
    bench_tool "$name" "${BUILD:-build}/libddl.a" $libs "$@"
}

# The vCPUs of these machines need not be equal: one can run LeNet's step 1.2 to 1.45 times slower
# than the other (memory-bound ops 2 to 3 times) while cores.c's multiply-adds show both alike,
# and the slow spells come and go by tenths of a second to minutes, on each vCPU apart (a lone
# LeNet's forward: 570 against 830 us a step, by turns). A 1-thread or 1-rank run lands on
# either; a 2-rank run waits for the slower at every step (lockstep.c measures what that costs).
cores_probe() {
    bin=$(bench_tool cores) || { echo "cores: cannot build $BENCH_DIR/cores.c"; return 0; }
    "$bin" 3 | tee -a "$1"
    ops=$(ddl_tool lenet_ops) && command -v taskset > /dev/null || return 0
    us=""
    for cpu in 0 1; do
        us="$us${us:+,}$(taskset -c $cpu "$ops" --threads 1 | sed -n 's/^ *total *\([0-9.]*\).*/\1/p')"
    done
    echo "vcpus: lenet_ops_1thread_us=$us" | tee -a "$1"
}

# lockstep_probe FILE: one round of tools/bench/lockstep.c (LeNet's step in 2 pinned processes
# that meet after every step and exchange nothing) on the caller's $DATA, its line appended to
# FILE. The vCPUs' slow spells come and go on each apart, so whatever meets every step (2 ranks,
# 2 threads running a part each) goes at the slower one's pace: this is that ceiling, with no
# exchange at all.
lockstep_probe() {
    bin=$(ddl_tool lockstep) || { echo "lockstep: cannot build $BENCH_DIR/lockstep.c"; return 0; }
    "$bin" "$DATA" 1 | tee -a "$1"
}

# lockstep_record WHAT RATE FILE: RATE (LeNet's images/s at 2 ranks or 2 threads) against the
# median lockstep pair of FILE's rounds
lockstep_record() {
    [ -s "$3" ] || return 0
    held=$(sed -n 's/.* lockstep=\([0-9.]*\) .*/\1/p' "$3" | median)
    ceil=$(sed -n 's/.* lockstep_ceiling=\([0-9.]*\).*/\1/p' "$3" | median)
    record "$1" "$2" "2 processes in lockstep, batch 32 each, exchanging nothing (lockstep.c; the ceiling of synchronous training here: ${ceil}x 1 alone)" "$held" "$(ratio "$2" "$held")" "-" "-" "-"
}

cores_record() {
    [ -s "$2" ] || return 0
    for kind in "" mem_; do
        together=$(sed -n "s/.* ${kind}together=\\([0-9.,]*\\) .*/\\1/p" "$2" | awk -F, '{ s = 0; for (i = 1; i <= NF; i++) s += $i; print s }' | median)
        alone=$(sed -n "s/.* ${kind}alone=\\([0-9.,]*\\) .*/\\1/p" "$2" | awk -F, '{ s = 0; for (i = 1; i <= NF; i++) s += $i; print s / NF }' | median)
        if [ -z "$kind" ]; then
            record "$1: FMA GFLOP/s of both cores at once (cores.c)" "$together" "1 core alone" "$alone" "$(ratio "$together" "$alone")" "-"
        else
            record "$1: GB/s read by both cores at once (cores.c)" "$together" "1 core alone" "$alone" "$(ratio "$together" "$alone")" "-"
        fi
    done
    # hand-off: 1 MiB read by the core that wrote it against the other core (data passed between threads)
    remote=$(sed -n "s/.* handoff_remote=\([0-9.]*\) .*/\1/p" "$2" | median)
    local_=$(sed -n "s/.* handoff_local=\([0-9.]*\) .*/\1/p" "$2" | median)
    [ "$remote" != "-" ] && record "$1: GB/s reading 1 MiB the other core wrote (cores.c)" "$remote" \
        "the core that wrote it" "$local_" "$(ratio "$remote" "$local_")" "-"
    # LeNet's step ops (1 thread) on the slower vCPU and on the faster: medians of each round's pair
    pairs=$(sed -n 's/^vcpus: lenet_ops_1thread_us=\([0-9.]*\),\([0-9.]*\)$/\1 \2/p' "$2")
    slow=$(printf '%s\n' "$pairs" | awk 'NF == 2 { print ($1 > $2 ? $1 : $2) }' | median)
    fast=$(printf '%s\n' "$pairs" | awk 'NF == 2 { print ($1 < $2 ? $1 : $2) }' | median)
    [ "$slow" != "-" ] && record "$1: LeNet's step ops, us, 1 thread, on the slower vCPU (lenet_ops.c)" "$slow" \
        "on the faster vCPU" "$fast" "$(ratio "$fast" "$slow")" "-"
    return 0
}

# peer_modes FILE CMD...: a PyTorch peer in each of the settings a PyTorch user turns on for speed
# (tools/bench/torch_modes.py: nchw, channels_last, bf16 autocast), one run each: "MODE RATE"
# lines appended to FILE (RATE "failed" where the mode does not run: PyTorch 1.13's autocast on
# GroupNorm), each printed; the nchw rate on standard output's last line (the peer of before).
peer_modes() {
    f=$1; shift
    nchw=""
    for m in nchw channels_last bf16; do
        r=$("$@" --mode "$m" 2> /dev/null | field images_per_sec)
        echo "$m ${r:-failed}" >> "$f"
        echo "   pytorch --mode $m: ${r:-failed} images/s" >&2
        [ "$m" = nchw ] && nchw=$r
    done
    echo "$nchw"
}

# best_mode FILE: "MODE MEDIAN" of the setting whose median rate in FILE is the highest.
best_mode() {
    for m in nchw channels_last bf16; do
        v=$(awk -v m="$m" '$1 == m && $2 != "failed" { print $2 }' "$1" | median)
        [ "$v" != "-" ] && echo "$m $v"
    done | sort -k2,2 -g | tail -n 1
}

# record_best WHAT DDL_RATE FILE TARGET: the table row of ddl against PyTorch's fastest setting.
record_best() {
    bm=$(best_mode "$3"); m=${bm% *}; v=${bm#* }
    echo "$1: against PyTorch's best setting ($m): ddl $2, pytorch $v, ratio $(ratio "$2" "$v")"
    record "$1" "$2" "PyTorch 1.13, its best setting ($m)" "$v" "$(ratio "$2" "$v")" "$4" "-" "-"
}

resnet_rate() {
    "$1" --data "$3" --arch "$2" --image-size 64 --epochs 2 --train-limit 640 --schedule constant --precision "$4" |
        sed -n 's/^epoch 2\/2 .* \([0-9.]*\) images\/s.*/\1/p'
}
