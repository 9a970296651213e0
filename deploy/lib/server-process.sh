# shellcheck shell=bash
# The lifecycle of a background server process, shared by the deploy/*-local scripts.
# Sourced, not run. Every wait here is bounded: these scripts run inside jest workers
# (spawnSync), where a wait that never ends blocks the whole test run.

# True while pid $1 runs, and, given a start time $2 (see started_at), only while it is
# still the process that started then. A zombie is not running: where nothing reaps
# orphans (a container whose PID 1 is not an init), a dead server stays a zombie and
# `kill -0` keeps succeeding on it, which would make `status` lie and `stop` wait forever.
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
  stat="${stat##*) }"
  [[ "${stat:0:1}" != Z ]] || return 1
  [[ -z "${2:-}" ]] || [[ "$(started_at "$1")" == "$2" ]]
}

# started_at PID: when PID started, in clock ticks since boot (/proc/PID/stat field 22);
# fails once PID is gone. A pid alone names a process only while it lives: pid_max is
# 32768 on these machines and a test run starts tens of thousands of processes, so the
# pid of a server that died soon belongs to another process, and a `stop` trusting it
# signals that process (seen: a registry killed a second into its startup). The pid
# and its start time together name one process.
started_at() {
  local stat fields
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  read -r -a fields <<<"${stat##*) }" # fields from 3 (state) on: field 22 is index 19
  [[ -n "${fields[19]:-}" ]] || return 1
  echo "${fields[19]}"
}

# Pid files: PIDFILE holds the server's pid (what other tools read), PIDFILE.start the
# pid again and its start time ("PID TICKS"; a .start naming another pid, left by a
# script that did not keep start times, is ignored). Where /proc cannot be read, no
# start time is kept, and the pid alone names the server.

# pid_record PIDFILE PID: writes both. A process already gone is recorded as "PID gone",
# a start time no process has, so it never reads as running.
pid_record() {
  local ticks
  echo "$2" >"$1"
  if ! kill -0 "$2" 2>/dev/null; then
    echo "$2 gone" >"$1.start"
  elif ticks="$(started_at "$2")"; then
    echo "$2 $ticks" >"$1.start"
  else
    rm -f "$1.start"
  fi
}

# recorded_start PIDFILE: the start time recorded for the pid in PIDFILE, or nothing.
recorded_start() {
  local pid recorded
  pid="$(cat "$1" 2>/dev/null)" || return 0
  recorded="$(cat "$1.start" 2>/dev/null)" || return 0
  [[ "${recorded%% *}" == "$pid" && "$recorded" == *" "* ]] && echo "${recorded#* }"
  return 0
}

# pid_running PIDFILE: true while the recorded process runs.
pid_running() {
  [[ -f "$1" ]] || return 1
  alive "$(cat "$1")" "$(recorded_start "$1")"
}

pid_forget() { rm -f "$1" "$1.start"; }

# stop_recorded PIDFILE TIMEOUT_SECONDS WHERE: stops the recorded server (stop_pid) and
# forgets it; a pid file whose process is gone, or is another process now, is only
# forgotten. WHERE names the server in "not running on WHERE".
stop_recorded() {
  local pid
  if ! pid_running "$1"; then
    [[ -f "$1" ]] && alive "$(cat "$1")" && say "$1 names pid $(cat "$1"), another process now; not signalling it"
    pid_forget "$1"; say "not running on $3"; return 0
  fi
  pid="$(cat "$1")"
  stop_pid "$pid" "$2" "$(recorded_start "$1")" || return 1
  pid_forget "$1"
  say "stopped (pid $pid)"
}

# stop_pid PID TIMEOUT_SECONDS [START]: TERM, wait up to the timeout, then KILL and wait
# up to 10 s more, signalling only the process that started at START (by default, the
# one that has the pid now). Prints through the caller's `say`. Fails if the process
# outlives the KILL.
stop_pid() {
  local pid="$1" deadline=$((SECONDS + $2)) start="${3:-}"
  [[ -n "$start" ]] || start="$(started_at "$pid" || true)"
  alive "$pid" "$start" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  while alive "$pid" "$start" && ((SECONDS < deadline)); do sleep 0.2; done
  alive "$pid" "$start" || return 0
  say "pid $pid did not stop within ${2}s; sending KILL"
  kill -KILL "$pid" 2>/dev/null || true
  deadline=$((SECONDS + 10))
  while alive "$pid" "$start" && ((SECONDS < deadline)); do sleep 0.1; done
  if alive "$pid" "$start"; then say "pid $pid still runs 10 s after KILL"; return 1; fi
}

# first_use DONE_FILE LOCK_FILE FUNCTION: runs FUNCTION (a first-use download or install)
# unless DONE_FILE exists, under an exclusive lock on LOCK_FILE (outside the directory
# FUNCTION replaces): two test files starting the same server at once on a new machine
# would otherwise unpack into one temporary directory together (seen: Maven's "Failed
# setting file attributes" for Apicurio). One fetches, the other waits and finds it done.
# The lock is released before any server starts, so no server process inherits it.
first_use() {
  local done_file="$1" lock_file="$2" run="$3"
  [[ -e "$done_file" ]] && return 0
  mkdir -p "$(dirname "$lock_file")"
  exec 8>"$lock_file"
  flock 8
  [[ -e "$done_file" ]] || "$run"
  exec 8>&-
}
