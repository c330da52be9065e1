#!/bin/sh
# test_slurm_real.sh - ddl under a real Slurm (Debian's slurmctld, slurmd and munge, installed by
# make's install step), started by this test on this machine as a one-node cluster: its own
# munged (key, socket and files in a temporary directory), a slurmctld and a slurmd on free ports,
# nothing of the machine's own configuration touched. `srun -n2` with only DDL_TOKEN set trains to
# the weights of `ddlrun -n 2` (shm), and over tcp (the rendezvous from the step's node list) to
# the same; an `sbatch --wait` script does too. The daemons are stopped at the end. Needs root
# (slurmd runs the steps as their user; SlurmUser=root); skipped with the reason otherwise.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
skip() { echo "skipped: $*"; echo "0 passed, 0 failed"; exit 0; }
[ "$(id -u)" -eq 0 ] || skip "needs root to run slurmd"
for c in munged slurmctld slurmd srun sbatch sinfo; do
    command -v $c > /dev/null 2>&1 || PATH=$PATH:/usr/sbin
    command -v $c > /dev/null 2>&1 || skip "no $c (apt-get install slurmctld slurmd slurm-client munge)"
done
tmp=$(mktemp -d); chmod 755 "$tmp"
stop() {
    for p in "$tmp"/slurmd.pid "$tmp"/slurmctld.pid "$tmp"/munged.pid; do [ -s "$p" ] && kill "$(cat "$p")" 2>/dev/null; done
    sleep 0.5; rm -rf "$tmp"
}
trap stop EXIT
trap 'exit 1' INT TERM
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ARGS="--epochs 1 --train-limit 2000 --seed 3 --quiet"

# ---- the cluster ----
head -c 1024 /dev/urandom > "$tmp/munge.key"; chmod 400 "$tmp/munge.key"
munged --force -S "$tmp/munge.sock" --key-file "$tmp/munge.key" --pid-file "$tmp/munged.pid" \
    --log-file "$tmp/munged.log" --seed-file "$tmp/munged.seed" 2> "$tmp/munged.err" || skip "munged: $(cat "$tmp/munged.err")"
host=$(hostname); p1=$(free_port); p2=$(free_port)
mkdir -p "$tmp/state" "$tmp/spool"
cat > "$tmp/slurm.conf" <<CONF
ClusterName=ddltest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$p1
SlurmdPort=$p2
AuthType=auth/munge
AuthInfo=socket=$tmp/munge.sock
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmUser=root
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmdSpoolDir=$tmp/spool
StateSaveLocation=$tmp/state
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=10 State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF=$tmp/slurm.conf
slurmctld -c -f "$SLURM_CONF" 2> "$tmp/ctld.err" || skip "slurmctld would not start: $(cat "$tmp/ctld.err")"
slurmd -f "$SLURM_CONF" 2> "$tmp/d.err" || skip "slurmd would not start: $(cat "$tmp/d.err")"
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

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
