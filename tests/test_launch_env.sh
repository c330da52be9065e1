#!/bin/sh
# test_launch_env.sh - ranks that learn their place from a launcher's variables, with no DDL_
# variable but the token. srun's: 4 tasks on "2 nodes" (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
# SLURM_NODEID, SLURM_STEP_TASKS_PER_NODE "2(x2)", SLURM_STEP_NODELIST "127.0.0.[1,2]") pick tcp,
# rendezvous at the node list's first host on a port derived from the job and step ids, and get
# ddlrun -n 4 -t tcp's weights. torchrun's conventions: ranks started with the variables torchrun sets
# (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID,
# GROUP_RANK, ...) and no DDL_ variable but the token train together, over shm (the default on
# one host) and over tcp (rendezvous at MASTER_ADDR:MASTER_PORT), to the weights of ddlrun -n 2;
# inside a Slurm step (srun torchrun) torchrun's ranks win over SLURM_PROCID; without torchrun's
# run id, Slurm's variables win as before; a malformed RANK is refused by name. Debian's torchrun
# itself (python3-torch 1.13) fails on Debian's Python 3.11 before it starts anything
# (AttributeError in elastic/multiprocessing/api.py), so the variables are set as it sets them.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ARGS="--epochs 1 --train-limit 2000 --seed 3 --quiet"
ref=$("$BUILD/bin/ddlrun" -n 2 "$BUILD/bin/lenet" $ARGS 2>&1 | field weights_crc)
[ -n "$ref" ] && ok || bad "ddlrun -n 2 gave no summary"

# workers EXTRA...: two workers with torchrun's variables (and EXTRA), no DDL_ variable but the
# token; rank 0's output in $tmp/w0, rank 1's in $tmp/w1; exit status: the worse of the two
workers() {
    port=$(free_port)
    for r in 0 1; do
        env -i PATH="$PATH" HOME="$HOME" OPENBLAS_NUM_THREADS=1 RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 \
            GROUP_RANK=0 ROLE_RANK=$r ROLE_WORLD_SIZE=2 GROUP_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0 DDL_TOKEN=torchrun-test-secret-0123456789 \
            "$@" timeout 60 "$BUILD/bin/lenet" $ARGS > "$tmp/w$r" 2>&1 &
        eval "pid$r=\$!"
    done
    wait "$pid0"; a=$?; wait "$pid1"; b=$?
    [ $a -ne 0 ] && return $a; return $b
}

for t in shm tcp; do
    extra="TORCHELASTIC_RUN_ID=job-$$-$t"
    [ $t = tcp ] && extra="$extra DDL_TRANSPORT=tcp"
    workers $extra; rc=$?
    crc=$(field weights_crc < "$tmp/w0"); w=$(field world < "$tmp/w0"); tr=$(field transport < "$tmp/w0")
    echo "torchrun's variables, $t: exit $rc, transport=$tr world=$w weights_crc=$crc (ddlrun: $ref)"
    [ $rc -eq 0 ] && [ "$w" = 2 ] && [ "$tr" = $t ] && [ "$crc" = "$ref" ] && ok ||
        { bad "torchrun's variables over $t"; cat "$tmp/w0" "$tmp/w1" | tail -n 4; }
done

# srun torchrun: Slurm's variables describe the node's one task; torchrun's the workers
workers TORCHELASTIC_RUN_ID=job-$$-slurm SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 SLURM_JOB_ID=7; rc=$?
crc=$(field weights_crc < "$tmp/w0"); w=$(field world < "$tmp/w0")
echo "inside a Slurm step: exit $rc, world=$w weights_crc=$crc"
[ $rc -eq 0 ] && [ "$w" = 2 ] && [ "$crc" = "$ref" ] && ok || { bad "torchrun inside Slurm"; tail -n 3 "$tmp/w0"; }

# no torchrun run id: Slurm's variables win (each worker is the one task of a 1-task step)
workers SLURM_PROCID=0 SLURM_NTASKS=1; rc=$?
w0=$(field world < "$tmp/w0"); w1=$(field world < "$tmp/w1")
echo "Slurm's variables without torchrun's run id: exit $rc, worlds $w0 $w1"
[ $rc -eq 0 ] && [ "$w0" = 1 ] && [ "$w1" = 1 ] && ok || bad "Slurm's variables did not win without a run id"

# srun -N2 -n4, as Slurm sets it (both "nodes" are this machine: 127.0.0.1 reaches it)
ref4=$("$BUILD/bin/ddlrun" -n 4 -t tcp "$BUILD/bin/lenet" $ARGS 2>&1 | field weights_crc)
job=$(( $$ % 100000 ))
for r in 0 1 2 3; do
    env -i PATH="$PATH" HOME="$HOME" OPENBLAS_NUM_THREADS=1 SLURM_PROCID=$r SLURM_NTASKS=4 SLURM_LOCALID=$((r % 2)) \
        SLURM_NODEID=$((r / 2)) SLURM_STEP_TASKS_PER_NODE='2(x2)' SLURM_TASKS_PER_NODE='2(x2)' SLURM_NNODES=2 \
        SLURM_STEP_NODELIST='127.0.0.[1,2]' SLURM_JOB_NODELIST='127.0.0.[1,2]' SLURM_JOB_ID=$job SLURM_STEP_ID=0 \
        DDL_TOKEN=srun-test-secret-0123456789 timeout 60 "$BUILD/bin/lenet" $ARGS > "$tmp/s$r" 2>&1 &
    eval "spid$r=\$!"
done
rc=0; for r in 0 1 2 3; do eval "wait \$spid$r" || rc=1; done
crc=$(field weights_crc < "$tmp/s0"); w=$(field world < "$tmp/s0"); tr=$(field transport < "$tmp/s0")
echo "srun's variables, 2 nodes x 2: exit $rc, transport=$tr world=$w weights_crc=$crc (ddlrun -t tcp: $ref4)"
[ $rc -eq 0 ] && [ "$w" = 4 ] && [ "$tr" = tcp ] && [ -n "$crc" ] && [ "$crc" = "$ref4" ] && ok ||
    { bad "srun's variables"; cat "$tmp"/s* | tail -n 4; }

# a malformed RANK
out=$(env -i PATH="$PATH" RANK=one WORLD_SIZE=2 "$BUILD/bin/lenet" $ARGS 2>&1); rc=$?
echo "RANK=one: exit $rc: $out"
[ $rc -ne 0 ] && echo "$out" | grep -q "RANK=one is not a number" && ok || bad "RANK=one was not refused by name"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
