#!/bin/sh
# test_slurm_real.sh - ddl under a real Slurm (Debian's slurmctld, slurmd and munge, installed by
# make's install step), started by this test on this machine as a one-node cluster: its own
# munged (key, socket and files in a temporary directory), a slurmctld and a slurmd on free ports,
# nothing of the machine's own configuration touched. `srun -n2` with only DDL_TOKEN set trains to
# the weights of `ddlrun -n 2` (shm), and over tcp (the rendezvous from the step's node list) to
# the same; an `sbatch --wait` script does too. docs/CLUSTER.md's requeue recipe (sbatch --requeue
# --signal=USR1@60, exit 75 turned into `scontrol requeue`): SIGUSR1 mid-run saves a checkpoint,
# the job is requeued once and its second start resumes to an uninterrupted run's weights. The
# jobs and daemons are stopped at the end. Needs root (slurmd runs the steps as their user;
# SlurmUser=root); skipped with the reason otherwise.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
skip() { echo "skipped: $*"; echo "0 passed, 0 failed"; exit 0; }
[ "$(id -u)" -eq 0 ] || skip "needs root to run slurmd"
for c in munged slurmctld slurmd srun sbatch sinfo; do
    command -v $c > /dev/null 2>&1 || PATH=$PATH:/usr/sbin
    command -v $c > /dev/null 2>&1 || skip "no $c (apt-get install slurmctld slurmd slurm-client munge)"
done
tmp=$(mktemp -d); chmod 755 "$tmp"
id=""
stop() {
    [ -n "$id" ] && scancel "$id" 2>/dev/null && sleep 1
    slurm_stop "$tmp" "$tmp"/slurmd.pid "$tmp"/slurmctld.pid "$tmp"/munged.pid; rm -rf "$tmp"
}
trap stop EXIT
trap 'exit 1' INT TERM
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ARGS="--epochs 1 --train-limit 2000 --seed 3 --quiet"

# ---- the cluster ----
slurm_munged "$tmp" || skip "munged: $(cat "$tmp/munged.err")"
host=$(hostname); p1=$(free_port); p2=$(free_port)
first_job=$(($(od -An -N2 -tu2 /dev/urandom) * 100 + 1000)) # job ids no other test's cluster is using
mkdir -p "$tmp/state" "$tmp/spool"
{ cat <<CONF
ClusterName=ddltest
FirstJobId=$first_job
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$p1
SlurmdPort=$p2
# cred_expire: also how long a requeued job waits before it can start again (120 s by default)
AuthInfo=socket=$tmp/munge.sock,cred_expire=5
# and the schedulers' passes that start it once eligible (60 s and 30 s by default)
SchedulerParameters=sched_interval=1,bf_interval=1
SlurmdPidFile=$tmp/slurmd.pid
SlurmdSpoolDir=$tmp/spool
SlurmdLogFile=$tmp/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=10 State=UP OverSubscribe=FORCE:4
CONF
  slurm_conf_common "$tmp"; } > "$tmp/slurm.conf"
export SLURM_CONF=$tmp/slurm.conf
slurmctld -c -f "$SLURM_CONF" 2> "$tmp/ctld.err" || skip "slurmctld would not start: $(cat "$tmp/ctld.err")"
slurm_start_slurmd "$tmp/d.err" slurmd -f "$SLURM_CONF" || slurm_skip_slurmd "$tmp/d.err" "$tmp/slurmd.log"
for i in $(seq 1 100); do sinfo -h -o %t 2>/dev/null | grep -q idle && break; sleep 0.1; done
state=$(sinfo -h -o %t 2>&1)
echo "one-node Slurm cluster on ports $p1 and $p2: node $host $state"
[ "$state" = idle ] && ok || { bad "the node did not come up ($state)"; tail -n 5 "$tmp/slurmd.log"; }

# ---- srun, shm and tcp ----
ref=$("$BUILD/bin/ddlrun" -n 2 "$BUILD/bin/lenet" $ARGS 2>&1 | field weights_crc)
for t in shm tcp; do
    extra=""; [ $t = tcp ] && extra="DDL_TRANSPORT=tcp"
    env -u DDL_RANK -u DDL_WORLD_SIZE -u DDL_MASTER $extra DDL_TOKEN=slurm-test-secret-0123456789 \
        timeout 120 srun -N1 -n2 --overcommit "$BUILD/bin/lenet" $ARGS > "$tmp/srun.$t" 2>&1; rc=$?
    crc=$(field weights_crc < "$tmp/srun.$t"); w=$(field world < "$tmp/srun.$t"); tr=$(field transport < "$tmp/srun.$t")
    echo "srun -n2 ($t): exit $rc, transport=$tr world=$w weights_crc=$crc (ddlrun -n 2: $ref)"
    [ $rc -eq 0 ] && [ "$w" = 2 ] && [ "$tr" = $t ] && [ -n "$crc" ] && [ "$crc" = "$ref" ] && ok ||
        { bad "srun -n2 over $t"; tail -n 5 "$tmp/srun.$t"; }
done

# ---- sbatch ----
cat > "$tmp/job.sh" <<JOB
#!/bin/sh
#SBATCH --ntasks=2 --overcommit --output=$tmp/job.out
export DDL_TOKEN=slurm-test-secret-0123456789
srun $PWD/$BUILD/bin/lenet $ARGS
JOB
timeout 120 sbatch --wait "$tmp/job.sh" > "$tmp/sbatch" 2>&1; rc=$?
crc=$(field weights_crc < "$tmp/job.out" 2>/dev/null)
echo "sbatch --wait: exit $rc, $(cat "$tmp/sbatch"), weights_crc=$crc"
[ $rc -eq 0 ] && [ "$crc" = "$ref" ] && ok || { bad "the sbatch job"; cat "$tmp/job.out" 2>/dev/null | tail -n 5; }

# ---- preemption and requeue ----
# docs/CLUSTER.md's script: --requeue, --signal=USR1@60 (a minute before the time limit; here
# `scancel --signal=USR1` sends it at once, to the step's tasks as the timer would, not to the batch
# shell), the program's exit 75 after its checkpoint turned into `scontrol requeue`; the second
# start (SLURM_RESTART_COUNT=1) resumes from the checkpoint. Each start logs to its own file.
# DDL_JOB: the shared memory of this job's own, not /ddl-u0 (which another job of root's running on
# this machine may hold).
LONG="--epochs 4 --train-limit 16000 --seed 5"
ref=$("$BUILD/bin/ddlrun" -n 2 "$BUILD/bin/lenet" $LONG --quiet 2>&1 | field weights_crc)
cat > "$tmp/requeue.sh" <<JOB
#!/bin/sh
#SBATCH --ntasks=2 --overcommit --time=5 --signal=USR1@60 --requeue --open-mode=append --output=$tmp/requeue.out
export DDL_TOKEN=slurm-test-secret-0123456789 DDL_JOB=slurm-\$SLURM_JOB_ID
n=\${SLURM_RESTART_COUNT:-0}
srun $PWD/$BUILD/bin/lenet $LONG --checkpoint $tmp/ck --resume > $tmp/run.\$n 2>&1
rc=\$?
echo "start \$n: srun exit \$rc"
[ \$rc -eq 75 ] && scontrol requeue \$SLURM_JOB_ID
exit \$rc
JOB
t0=$(date +%s)
id=$(sbatch --parsable "$tmp/requeue.sh" 2>&1)
for i in $(seq 1 300); do grep -q "^ddl [0-9]" "$tmp/run.0" 2>/dev/null && break; sleep 0.1; done
sleep 0.3; scancel --signal=USR1 "$id"; sent=$?
for i in $(seq 1 600); do
    st=$(scontrol show job "$id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case "$st" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|"") break ;; esac; sleep 0.1
done
restarts=$(scontrol show job "$id" 2>/dev/null | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
said=$(grep -h "preempted (SIGUSR1) at step" "$tmp/run.0" 2>/dev/null)
crc=$(field weights_crc < "$tmp/run.1" 2>/dev/null)
echo "sbatch --requeue, job $id: USR1 sent ($sent), $(tr '\n' ' ' < "$tmp/requeue.out" 2>/dev/null)state $st, Restarts=$restarts, $(($(date +%s) - t0)) s"
echo "  first start: $said"
echo "  second start: weights_crc=$crc (uninterrupted: $ref)"
[ "$sent" -eq 0 ] && [ -n "$said" ] && ok || { bad "the first start did not save on SIGUSR1"; tail -n 5 "$tmp/run.0"; }
grep -q "^summary" "$tmp/run.0" && bad "the preempted start printed a summary"
[ "$st" = COMPLETED ] && [ "$restarts" = 1 ] && grep -q "^start 0: srun exit 75" "$tmp/requeue.out" &&
    grep -q "^start 1: srun exit 0" "$tmp/requeue.out" && [ ! -e "$tmp/run.2" ] && ok || { bad "not requeued exactly once"; cat "$tmp/requeue.out"; }
[ -n "$crc" ] && [ "$crc" = "$ref" ] && ok || { bad "the requeued job's weights differ from an uninterrupted run's"; tail -n 5 "$tmp/run.1"; }

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
