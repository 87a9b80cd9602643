# What the data-parallel tests share (sourced): their arguments, a scratch folder, and mpirun for
# two ranks on one machine. Usage: <test>.sh CHECK TAPESTRY [MPIEXEC]
#   CHECK     the tapestry_dist_check program (tests/dist/dist_check.cpp)
#   TAPESTRY  the tapestry command line
#   MPIEXEC   mpirun (default: mpirun on the PATH)
set -euo pipefail
check=$1
tapestry=$2
mpiexec=${3:-mpirun}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# One thread per rank: two ranks of two threads on a small machine wait for each other's threads.
export OMP_NUM_THREADS=1

# Two ranks on this machine, whatever its core count; as root in a container too.
two_ranks() { "$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$@"; }

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
