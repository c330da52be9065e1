#!/bin/sh
# test_multihost.sh - ranks on several hosts: two network namespaces, each a host with its own
# address (10.77.0.1 and 10.77.0.2 on a veth pair), run one ddlrun each (--nodes 2 --node-rank R
# --master 10.77.0.1:PORT) over tcp and over zmq, and must end with the same weights_crc as the
# same job on one host (ddlrun -n 2 -t shm). Before the real second rank joins, an impostor with
# a wrong DDL_TOKEN and one with a wrong DDL_JOB try to join as rank 1: each must be refused at
# the handshake with a clear message, and the job must go on undisturbed. Then mpirun (Open MPI)
# across the two hosts, its daemon started in B by an rsh agent: the same weights over mpi.
# Needs root and `ip netns`; skipped with the reason otherwise. The namespaces are created with
# names unique to this run and deleted on exit.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
. tests/netns.sh
netns_hosts ddlmh 10.77.0

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ARGS="--epochs 1 --train-limit 2000 --seed 42 --quiet --data $DATA"

ref=$("$BUILD/bin/ddlrun" -n 2 -t shm "$BUILD/bin/lenet" $ARGS 2>&1 | field weights_crc)
echo "one host, 2 ranks over shm: weights_crc=$ref"
[ -n "$ref" ] && ok || bad "the one-host reference run gave no summary"

# node NS RANK TRANSPORT: ddlrun for node RANK inside namespace NS (extra environment before it)
node() {
    ns=$1; r=$2; t=$3; shift 3
    ip netns exec "$ns" env "$@" "$BUILD/bin/ddlrun" -n 1 --nodes 2 --node-rank "$r" --master "10.77.0.1:$port" \
        --timeout 30 -t "$t" "$BUILD/bin/lenet" $ARGS
}

# impostor WHAT EXPECTED ENV...: a rank 1 that must be refused with EXPECTED in its error
impostor() {
    what=$1; want=$2; shift 2
    # over zmq a job with a token makes ZeroMQ's own handshake ask for a credential derived from
    # the token and the job id (transports/zmq_zap.c): both are refused there, in one message
    [ "$t" = zmq ] && want="refused us at ZeroMQ's handshake: wrong token or job id mismatch"
    start=$(date +%s)
    out=$(timeout 40 ip netns exec "$B" env "$@" "$BUILD/bin/ddlrun" -n 1 --nodes 2 --node-rank 1 \
        --master "10.77.0.1:$port" --timeout 10 -t "$t" "$BUILD/bin/lenet" $ARGS 2>&1)
    rc=$?
    if [ "$rc" -ne 0 ] && printf '%s' "$out" | grep -q "$want"; then
        ok; echo "  $t: a rank with a $what was refused in $(( $(date +%s) - start )) s: $(printf '%s' "$out" | grep -m1 "$want" | cut -c1-150)"
    else
        bad "$t: a rank with a $what was not refused with '$want' (exit $rc)"; printf '%s\n' "$out" | tail -n 5
    fi
}

for t in tcp zmq; do
    port=$((29000 + $$ % 1000))
    [ "$t" = zmq ] && port=$((port + 1))
    if "$BUILD/bin/ddl-bench" allreduce -t "$t" -n 2 -b 4K -e 4K --iters 1 2>&1 | grep -q "not compiled in"; then
        echo "$t: skipped (not compiled in)"; continue
    fi
    node "$A" 0 "$t" DDL_TOKEN=multihost-secret > "$tmp/rank0.$t" 2>&1 &
    bg_pid=$!
    # ddlrun --nodes derives the job id from the token: a wrong token is another job at once, and
    # with the job id of the real token (which a stranger cannot compute) the token check itself
    job=$("$PYTHON" -c 'import hmac, hashlib, sys
print("m" + hmac.new(b"multihost-secret", ("ddl job " + sys.argv[1]).encode(), hashlib.sha256).hexdigest()[:16])' "10.77.0.1:$port")
    impostor "wrong DDL_TOKEN" "job id mismatch (ours 'm[0-9a-f]*'; ddlrun --nodes derives it from the token" \
        DDL_TOKEN=not-the-secret
    impostor "wrong DDL_TOKEN and the right job id" "wrong token" DDL_TOKEN=not-the-secret DDL_JOB="$job"
    impostor "wrong DDL_JOB" "job id mismatch" DDL_TOKEN=multihost-secret DDL_JOB=some-other-job
    out1=$(node "$B" 1 "$t" DDL_TOKEN=multihost-secret 2>&1); rc1=$?
    wait "$bg_pid"; rc0=$?; bg_pid=""
    crc=$(field weights_crc < "$tmp/rank0.$t")
    tr=$(field transport < "$tmp/rank0.$t")
    echo "2 hosts over $t: transport=$tr weights_crc=$crc (node exits $rc0 $rc1)"
    if [ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ] && [ "$tr" = "$t" ] && [ -n "$crc" ]; then ok; else
        bad "2 hosts over $t did not finish cleanly"; tail -n 5 "$tmp/rank0.$t"; printf '%s\n' "$out1" | tail -n 5; fi
    [ -n "$crc" ] && [ "$crc" = "$ref" ] && ok || bad "2 hosts over $t: weights_crc '$crc' differs from one host's '$ref'"
done

# mpirun across the two hosts: Open MPI's launcher reaches host B through an rsh agent that runs
# its daemon inside B's namespace (mpirun itself runs in A); the job must give the one-host weights.
if ! command -v mpirun >/dev/null 2>&1 || ! mpirun --version 2>/dev/null | grep -q "Open MPI"; then
    echo "mpirun across hosts: skipped (no Open MPI mpirun)"
elif ! nm "$BUILD/libddl.a" 2>/dev/null | grep -q ' U MPI_Isend'; then
    echo "mpirun across hosts: skipped ($BUILD/libddl.a was built without MPI)"
else
    cat > "$tmp/agent" <<AGENT
#!/bin/sh
host=\$1; shift
case "\$host" in 10.77.0.1) ns=$A ;; 10.77.0.2) ns=$B ;; *) echo "agent: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec "\$ns" sh -c "\$*"
AGENT
    chmod +x "$tmp/agent"
    # under SAN=address, Open MPI's own allocations at exit are reported as leaks (as in test_mpi.sh)
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    mpi() {
        timeout 60 ip netns exec "$A" mpirun -x ASAN_OPTIONS --allow-run-as-root -np 2 -H 10.77.0.1:1,10.77.0.2:1 \
            --mca plm_rsh_agent "$tmp/agent" --mca btl self,tcp --mca btl_tcp_if_include 10.77.0.0/24 \
            --mca oob_tcp_if_include 10.77.0.0/24 -x OPENBLAS_NUM_THREADS=1 "$@"
    }
    nets=$(mpi sh -c 'readlink /proc/self/ns/net' 2>&1 | sort -u | grep -c '^net:')
    [ "$nets" -eq 2 ] && ok || bad "mpirun did not start its 2 ranks in 2 network namespaces ($nets)"
    out=$(mpi "$BUILD/bin/lenet" $ARGS 2>&1); rc=$?
    crc=$(printf '%s\n' "$out" | field weights_crc); tr=$(printf '%s\n' "$out" | field transport)
    echo "mpirun across 2 hosts: transport=$tr weights_crc=$crc (exit $rc)"
    [ "$rc" -eq 0 ] && [ "$tr" = mpi ] && [ "$crc" = "$ref" ] && ok ||
        { bad "mpirun across 2 hosts: exit $rc, transport '$tr', weights_crc '$crc' (one host: '$ref')"; printf '%s\n' "$out" | tail -n 5; }
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
