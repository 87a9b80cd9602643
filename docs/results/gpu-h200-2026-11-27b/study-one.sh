#!/usr/bin/env bash
# One line of sweep-jobs.sh: '@' in the --extra value stands for a space.
args=()
for a in "$@"; do args+=("${a//@/ }"); done
exec scripts/study-neural-clustering --tapestry "$TAPESTRY_BIN" "${args[@]}" 2>/dev/null
