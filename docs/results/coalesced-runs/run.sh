#!/usr/bin/env bash
# Before and after for_each_run merged the dims every operand steps through as one (commit ddcd16d):
# the same rows and rounds as docs/results/bf16-convert/run.sh (each app's step, float32 and
# --precision bf16, five rounds alternating, then the speech recogniser's bf16 profile), which this
# runs with the two programs given.
# Usage, from the repository root, on a quiet machine:
#   docs/results/coalesced-runs/run.sh BEFORE AFTER OUT_DIR
set -euo pipefail
exec "$(dirname "$0")/../bf16-convert/run.sh" "$@"
