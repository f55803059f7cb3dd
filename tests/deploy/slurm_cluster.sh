# A one-node Slurm for the deploy tests (sourced after lib.sh): munged, slurmctld and
# slurmd from Debian's munge and slurm-wlm packages, configured here under a temporary
# directory (own munge key and socket, own slurm.conf, state, spool and logs, free ports),
# without cgroups or accounting, so that it runs in a container as root. Nothing under
# /etc is read or written: the clients find the cluster through SLURM_CONF.
#
#   slurm_usable || skip "why"   # SLURM_WHY says why not
#   slurm_start DIR              # exports SLURM_CONF; slurm_stop in an EXIT trap
#   slurm_submit ARGS; slurm_wait_job "$SLURM_LAST_JOB" 120; slurm_job_field ID JobState

SLURM_PIDS=()  # munged, slurmctld, slurmd: the daemons slurm_start started
SLURM_JOBS=()  # jobs the test submitted (slurm_submit), cancelled by slurm_stop
SLURM_DIR=
SLURM_WHY=

# slurm_usable: whether this machine can run the daemons (root, the packages installed).
slurm_usable() {
  local exe
  if [[ $(id -u) -ne 0 ]]; then
    SLURM_WHY="not root: slurmd must run as root to start jobs"
    return 1
  fi
  for exe in munged munge slurmctld slurmd sbatch scontrol scancel srun; do
    if ! command -v "$exe" >/dev/null 2>&1; then
      SLURM_WHY="$exe not found (scripts/install-deps.sh installs Debian's slurm-wlm and munge)"
      return 1
    fi
  done
  # slurmd initialises its cgroup plugin even with proctrack/linuxproc and task/none, and
  # gives up without a cgroup filesystem (a chroot, or a container without /sys/fs/cgroup).
  if ! awk '$2 ~ "^/sys/fs/cgroup" && ($3 == "cgroup" || $3 == "cgroup2") { found = 1 }
            END { exit !found }' /proc/self/mounts; then
    SLURM_WHY="no cgroup filesystem under /sys/fs/cgroup, which slurmd needs to start"
    return 1
  fi
}

# slurm_conf DIR NODE CTLD_PORT SLURMD_PORT: the cluster's slurm.conf on stdout. The node
# line is slurmd's own view of the machine (slurmd -C), so CPUs and memory are the real
# ones; no GRES: GPU jobs are asked for with --gpus-per-node=0 here.
slurm_conf() {
  local dir=$1 node=$2
  local hw
  hw=$(slurmd -C 2>/dev/null | sed -n 's/^NodeName=[^ ]* //p' | head -1)
  [[ -n $hw ]] || hw="CPUs=$(nproc)"
  cat <<EOF
ClusterName=spexdtest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$3
SlurmdPort=$4
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# Time for spexd's drain (DRAIN_SECONDS in the job) between scancel's SIGTERM and SIGKILL.
KillWait=60
MinJobAge=600
NodeName=$node NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
}

slurm_start() {
  SLURM_DIR=$1
  local dir=$1 node
  node=$(hostname -s)
  # munged refuses a socket in a directory that not everyone can enter (mktemp -d makes
  # 0700 ones, hence the parent too); the key itself stays 0600.
  mkdir -p "$dir"/{munge,state,spool,log}
  chmod go+rx "$(dirname "$dir")" "$dir" "$dir/munge"
  (umask 077 && head -c 1024 /dev/urandom >"$dir/munge/munge.key")
  : >"$dir/plugstack.conf"
  munged --foreground --key-file="$dir/munge/munge.key" --socket="$dir/munge/socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" >"$dir/log/munged.out" 2>&1 &
  SLURM_PIDS+=($!)
  local i
  for ((i = 0; i < 50; ++i)); do
    [[ -S $dir/munge/socket ]] && munge -S "$dir/munge/socket" -n >/dev/null 2>&1 && break
    kill -0 "${SLURM_PIDS[0]}" 2>/dev/null || { cat "$dir/log/munged.log"; fail "munged died"; }
    sleep 0.1
  done
  munge -S "$dir/munge/socket" -n >/dev/null || fail "munged does not answer"

  local ctld_port slurmd_port
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  while [[ $slurmd_port == "$ctld_port" ]]; do slurmd_port=$(free_port); done
  slurm_conf "$dir" "$node" "$ctld_port" "$slurmd_port" >"$dir/slurm.conf"
  export SLURM_CONF=$dir/slurm.conf
  # -D: in the foreground, so that these PIDs are the daemons; -c: no saved state.
  slurmctld -D -c -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
  SLURM_PIDS+=($!)
  slurmd -D -f "$SLURM_CONF" -N "$node" >"$dir/log/slurmd.out" 2>&1 &
  SLURM_PIDS+=($!)
  for ((i = 0; i < 300; ++i)); do  # up to a minute for the node to register as idle
    if [[ $(scontrol show node "$node" -o 2>/dev/null) =~ State=IDLE ]]; then
      say "slurm: node $node idle (slurmctld :$ctld_port, slurmd :$slurmd_port, $dir)"
      return 0
    fi
    local pid
    for pid in "${SLURM_PIDS[@]}"; do
      if ! kill -0 "$pid" 2>/dev/null; then
        slurm_logs
        # Refused by this machine rather than broken by the test: skip, saying why.
        if grep -qs "Unable to initialize cgroup plugin" "$dir"/log/slurmd.*; then
          echo "SKIP: slurmd cannot start here: its cgroup plugin cannot initialise (log above)"
          exit 77
        fi
        fail "a Slurm daemon died at start"
      fi
    done
    sleep 0.2
  done
  slurm_logs
  scontrol show node "$node" || true
  fail "the node did not come up"
}

# slurm_submit ARGS...: sbatch --parsable ARGS; the job id in SLURM_LAST_JOB (not printed:
# a command substitution would lose SLURM_JOBS, which slurm_stop needs).
slurm_submit() {
  local id
  id=$(sbatch --parsable "$@") || { slurm_logs; fail "sbatch $* failed"; }
  SLURM_LAST_JOB=${id%%;*}
  SLURM_JOBS+=("$SLURM_LAST_JOB")
}

# slurm_job_field ID KEY: one field of `scontrol show job` (no accounting needed).
slurm_job_field() {
  scontrol show job "$1" -o 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}

slurm_job_done() {
  case $(slurm_job_field "$1" JobState) in
    COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED)
      return 0 ;;
  esac
  return 1
}

# slurm_wait_job ID SECONDS: until the job has ended (and left COMPLETING).
slurm_wait_job() {
  local i
  for ((i = 0; i < $2 * 2; ++i)); do
    slurm_job_done "$1" && return 0
    sleep 0.5
  done
  return 1
}

slurm_logs() {
  local f
  for f in "$SLURM_DIR"/log/*; do
    [[ -s $f ]] || continue
    echo "---- $f (last 30 lines)"
    tail -n 30 "$f"
  done
}

# slurm_kill_leftovers: SIGKILL to any process still running in one of the test's jobs
# (found by its environment: this cluster's SLURM_CONF and one of SLURM_JOBS), in case a
# job outlived scancel.
slurm_kill_leftovers() {
  local env pid id
  for env in /proc/[0-9]*/environ; do
    pid=${env#/proc/}
    pid=${pid%/environ}
    [[ $pid != "$$" ]] || continue
    grep -qzxF "SLURM_CONF=$SLURM_CONF" "$env" 2>/dev/null || continue
    for id in "${SLURM_JOBS[@]}"; do
      if grep -qzxF "SLURM_JOB_ID=$id" "$env" 2>/dev/null; then
        echo "slurm: killing $pid ($(cat /proc/"$pid"/comm 2>/dev/null)), left over from job $id"
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done
  done
}

# slurm_stop: cancels the test's jobs that still run (their spexd drains), waits for them
# to end, then stops the daemons slurm_start started. Safe to call twice and on failure.
slurm_stop() {
  local id pid i
  if [[ ${#SLURM_JOBS[@]} -gt 0 && -n ${SLURM_CONF:-} ]]; then
    for id in "${SLURM_JOBS[@]}"; do
      slurm_job_done "$id" || scancel "$id" 2>/dev/null || true
    done
    for id in "${SLURM_JOBS[@]}"; do slurm_wait_job "$id" 90 || true; done
    slurm_kill_leftovers
  fi
  SLURM_JOBS=()
  for ((i = ${#SLURM_PIDS[@]} - 1; i >= 0; --i)); do  # slurmd, slurmctld, then munged
    pid=${SLURM_PIDS[i]}
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  SLURM_PIDS=()
}
