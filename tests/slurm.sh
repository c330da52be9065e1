# slurm.sh - what the real-Slurm tests share (tests/test_slurm_real.sh, tests/test_slurm_nodes.sh).
# Source it after lib.sh.

# slurm_munged DIR: a munged of the test's own (key, socket and files in DIR); its error in
# DIR/munged.err when it will not start (exit status non-zero).
slurm_munged() {
    head -c 1024 /dev/urandom > "$1/munge.key" && chmod 400 "$1/munge.key" &&
        munged --force -S "$1/munge.sock" --key-file "$1/munge.key" --pid-file "$1/munged.pid" \
            --log-file "$1/munged.log" --seed-file "$1/munged.seed" 2> "$1/munged.err"
}

# slurm_conf_common DIR: the slurm.conf lines every test cluster has (munge's credentials, no
# cgroups, no accounting, root as SlurmUser, slurmctld's files in DIR); each test adds its ports,
# AuthInfo, nodes and slurmd files.
slurm_conf_common() {
    cat <<CONF
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmUser=root
SlurmctldPidFile=$1/slurmctld.pid
StateSaveLocation=$1/state
SlurmctldLogFile=$1/slurmctld.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
CONF
}
