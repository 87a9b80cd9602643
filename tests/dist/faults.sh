#!/usr/bin/env bash
# A rank that fails mid-run stops the whole job within a bounded time, with a message naming it;
# no rank waits forever in a collective. Three cases, each under `timeout 60` (exit 124 = a hang):
#   - rank 1 throws an Error at step 20: the Trainer prints it and calls MPI_Abort;
#   - rank 1 is killed (SIGKILL) at step 20: mpirun sees it die and ends rank 0;
#   - rank 0 is killed the same way.
# The other rank is then waiting in the step's gradient all-reduce.
source "$(dirname "$0")/common.sh"

stop_case() {  # rank how expected-message
  local rank=$1 how=$2 expected=$3 rc=0 start end
  start=$(date +%s%N)
  timeout 60 "$mpiexec" --allow-run-as-root --oversubscribe -np 2 \
    "$check" train --batch 4 --steps 1000000 --distributed --fail-rank "$rank" --fail-step 20 --fail-how "$how" \
    > "$dir/out" 2>&1 || rc=$?
  end=$(date +%s%N)
  [ "$rc" -ne 124 ] || { cat "$dir/out"; fail "rank $rank ($how): the job hung (stopped by timeout after 60 s)"; }
  [ "$rc" -ne 0 ] || { cat "$dir/out"; fail "rank $rank ($how): the job exited 0"; }
  grep -q -- "$expected" "$dir/out" || { cat "$dir/out"; fail "rank $rank ($how): no message '$expected'"; }
  echo "faults: rank $rank ($how): the job stopped with exit code $rc after $(( (end - start) / 1000000 )) ms"
}

stop_case 1 error "rank 1 of 2: tapestry_dist_check: an injected failure at step 20; stopping every rank"
stop_case 1 kill "rank 1 with PID .* exited on signal 9"
stop_case 0 kill "rank 0 with PID .* exited on signal 9"
echo "faults: passed"
