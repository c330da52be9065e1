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

# slurm_start_slurmd ERR CMD...: CMD starts a slurmd, its complaints in ERR. slurmd goes into the
# background only once it has started, so the exit status says whether it did: where it cannot
# (no cgroup filesystem, as in many containers: "No filesystem mounted on /sys/fs/cgroup"), the
# real-Slurm tests skip (slurm_skip_slurmd) rather than fail every check that needs a node.
slurm_start_slurmd() {
    _err=$1; shift
    "$@" 2> "$_err"
}

# slurm_skip_slurmd FILE...: "skipped: slurmd would not start: REASON", REASON the first error
# line in FILE... (slurmd's standard error, then its log), and exit 0 with 0 checks. Stop the
# test's daemons first.
slurm_skip_slurmd() {
    _why=$(cat "$@" 2>/dev/null | grep -m 1 -i "error\|fatal" | cut -c1-200)
    [ -n "$_why" ] || _why=$(cat "$@" 2>/dev/null | grep -m 1 . | cut -c1-200)
    echo "skipped: slurmd would not start${_why:+: $_why}"
    echo "0 passed, 0 failed"
    exit 0
}

# slurm_stop DIR PIDFILE...: stop a test's daemons and wait until they are gone: those named in
# the pid files, and any whose command line names a file in DIR (munged's key, slurm.conf). The
# second catches a slurmctld or slurmd that had forked but not yet written its pid file when the
# test ended (a skip right after start-up, on a busy machine). SIGTERM, then SIGKILL for any still
# running after 10 s, so no daemon outlives the directory its files are in.
slurm_stop() {
    _dir=$1; shift
    _pids=$({ for _f in "$@"; do [ -s "$_f" ] && cat "$_f"; done; pgrep -f -- "$_dir/"; } 2>/dev/null |
        grep -vx "$$" | sort -u)
    [ -n "$_pids" ] || return 0
    kill $_pids 2>/dev/null
    for _i in $(seq 1 100); do
        _alive=""; for _p in $_pids; do kill -0 "$_p" 2>/dev/null && _alive="$_alive $_p"; done
        [ -z "$_alive" ] && return 0
        sleep 0.1
    done
    kill -9 $_alive 2>/dev/null
    return 0
}
