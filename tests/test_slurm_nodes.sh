#!/bin/sh
# test_slurm_nodes.sh - a real Slurm of two nodes on one machine: network namespaces a (10.89.0.1)
# and b (10.89.0.2), each with its own host name (a UTS namespace) and /etc/hosts (a mount
# namespace, the machine's own untouched), a slurmd in each, slurmctld on a, one munged. The
# daemons enter the network namespace with nsenter, not `ip netns exec`, which mounts a new /sys
# and so hides the cgroup hierarchy slurmd needs ("No filesystem mounted on /sys/fs/cgroup").
# `srun -N2 -n4` with only DDL_TOKEN set trains LeNet on 2 ranks of each node over tcp (the
# rendezvous from Slurm's node list) to the weights of one host's `ddlrun -n 4 -t tcp`, and its
# start-up line names both hosts. Needs root, `ip netns`, nsenter and Slurm; skipped otherwise, and
# where slurmd cannot start (tests/slurm.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
PATH=$PATH:/usr/sbin
for c in munged slurmctld slurmd srun sinfo nsenter unshare; do
    command -v $c > /dev/null 2>&1 || { echo "skipped: no $c (apt-get install slurmctld slurmd slurm-client munge)"; echo "0 passed, 0 failed"; exit 0; }
done
. tests/netns.sh
netns_hosts ddlsn 10.89.0
T=$tmp; chmod 755 "$T"; mkdir -p "$T/state" "$T/spool-a" "$T/spool-b"
stop_slurm() {
    slurm_stop "$T" "$T"/slurmd-a.pid "$T"/slurmd-b.pid "$T"/slurmctld.pid "$T"/munged.pid
}
trap 'stop_slurm; netns_cleanup' EXIT # munged runs outside the namespaces: stopped on every exit
export OPENBLAS_NUM_THREADS=1
slurm_munged "$T" || { echo "skipped: munged: $(cat "$T/munged.err")"; echo "0 passed, 0 failed"; exit 0; }
printf '127.0.0.1 localhost\n10.89.0.1 a\n10.89.0.2 b\n' > "$T/hosts"
p1=$((16000 + $$ % 1000)); p2=$((p1 + 1000))
{ cat <<CONF
ClusterName=ddlnodes
FirstJobId=$(($(od -An -N2 -tu2 /dev/urandom) * 100 + 1000))
SlurmctldHost=a(10.89.0.1)
SlurmctldPort=$p1
SlurmdPort=$p2
AuthInfo=socket=$T/munge.sock
SlurmdPidFile=$T/slurmd-%n.pid
SlurmdSpoolDir=$T/spool-%n
SlurmdLogFile=$T/slurmd-%n.log
NodeName=a NodeAddr=10.89.0.1 CPUs=2 State=UNKNOWN
NodeName=b NodeAddr=10.89.0.2 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=10 State=UP OverSubscribe=FORCE:4
CONF
  slurm_conf_common "$T"; } > "$T/slurm.conf"
export SLURM_CONF=$T/slurm.conf
# on NS NAME CMD...: CMD in that network namespace, with its own host name and /etc/hosts
on() { ns=$1; name=$2; shift 2; nsenter --net="/run/netns/$ns" unshare --uts --mount sh -c "hostname $name; mount --bind $T/hosts /etc/hosts; exec \"\$@\"" sh "$@"; }
# the daemons start as in tests/test_slurm_real.sh: where one cannot, the test is skipped, saying why
on "$A" a slurmctld -c -f "$SLURM_CONF" 2> "$T/ctld.err" ||
    { echo "skipped: slurmctld would not start: $(head -n 1 "$T/ctld.err")"; echo "0 passed, 0 failed"; exit 0; }
for n in a b; do
    ns=$A; [ $n = b ] && ns=$B
    slurm_start_slurmd "$T/slurmd-$n.err" on "$ns" $n slurmd -f "$SLURM_CONF" ||
        slurm_skip_slurmd "$T/slurmd-$n.err" "$T/slurmd-$n.log"
done
for i in $(seq 1 100); do s=$(on "$A" a sinfo -h -N -o '%N %t' 2>&1 | tr '\n' ' '); case "$s" in *"a idle"*"b idle"*) break ;; esac; sleep 0.1; done
echo "sinfo: $s"
case "$s" in *"a idle"*"b idle"*) ok ;; *) bad "both nodes idle (sinfo: $s)"; tail -n 3 "$T"/slurmd-*.log ;; esac

ARGS="--epochs 1 --train-limit 2000 --seed 3 --data $DATA"
ref=$("$BUILD/bin/ddlrun" -n 4 -t tcp "$BUILD/bin/lenet" $ARGS --quiet 2>&1 | field weights_crc)
on "$A" a env -u DDL_RANK -u DDL_WORLD_SIZE -u DDL_MASTER DDL_TOKEN=slurm-nodes-secret-0123456789 \
    timeout 120 srun -N2 -n4 --overcommit "$PWD/$BUILD/bin/lenet" $ARGS > "$T/srun.out" 2>&1; rc=$?
crc=$(field weights_crc < "$T/srun.out"); w=$(field world < "$T/srun.out"); tr=$(field transport < "$T/srun.out")
echo "srun -N2 -n4: exit $rc, transport=$tr world=$w weights_crc=$crc (one host: $ref); $(grep -o 'world 4 on [a-z,]*' "$T/srun.out")"
[ $rc -eq 0 ] && [ "$w" = 4 ] && [ "$tr" = tcp ] && [ -n "$crc" ] && [ "$crc" = "$ref" ]
check "srun -N2 -n4 across the two nodes: one host's weights" $?
grep -q "world 4 on a,b" "$T/srun.out"; check "its ranks ran on a and on b" $?
[ $rc -eq 0 ] || tail -n 5 "$T/srun.out"
stop_slurm; sleep 0.3
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
