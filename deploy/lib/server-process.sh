# shellcheck shell=bash
# The lifecycle of a background server process, shared by the deploy/*-local scripts.
# Sourced, not run. Every wait here is bounded: these scripts run inside jest workers
# (spawnSync), where a wait that never ends blocks the whole test run.

# True while pid $1 runs. A zombie is not running: where nothing reaps orphans (a
# container whose PID 1 is not an init), a dead server stays a zombie and `kill -0`
# keeps succeeding on it, which would make `status` lie and `stop` wait forever.
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
  stat="${stat##*) }"
  [[ "${stat:0:1}" != Z ]]
}

# stop_pid PID TIMEOUT_SECONDS: TERM, wait up to the timeout, then KILL and wait up to
# 10 s more. Prints through the caller's `say`. Fails if the process outlives the KILL.
stop_pid() {
  local pid="$1" deadline=$((SECONDS + $2))
  kill -TERM "$pid" 2>/dev/null || true
  while alive "$pid" && ((SECONDS < deadline)); do sleep 0.2; done
  alive "$pid" || return 0
  say "pid $pid did not stop within ${2}s; sending KILL"
  kill -KILL "$pid" 2>/dev/null || true
  deadline=$((SECONDS + 10))
  while alive "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
  if alive "$pid"; then say "pid $pid still runs 10 s after KILL"; return 1; fi
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
