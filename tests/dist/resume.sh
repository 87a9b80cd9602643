#!/usr/bin/env bash
# The copy-task app on 2 ranks: only rank 0 prints the result and writes the log and the checkpoint;
# that checkpoint resumes on 1 process and on 2 ranks; and a 2-rank run resumed on 2 ranks ends
# with exactly the weights of the same run without the break (every rank's random stream continues
# from the checkpointed counter).
source "$(dirname "$0")/common.sh"

flags=(--preset smoke --length 8 --layers 1 --heads 2 --head-dim 8 --ff 32 --batch 8 --attention full
       --eval-every 10 --eval-batches 2 --threads 1 --json)

two_ranks "$tapestry" copy-task "${flags[@]}" --steps 20 --distributed --save "$dir/two.ckpt" \
  --log "$dir/log.jsonl" > "$dir/two.json"
[ "$(wc -l < "$dir/two.json")" -eq 1 ] || { cat "$dir/two.json"; fail "expected one result line (rank 0's)"; }
grep -q '"ranks":2' "$dir/two.json" || fail "the result does not say 2 ranks: $(cat "$dir/two.json")"
grep -q '"steps":20' "$dir/two.json" || fail "the 2-rank run did not reach step 20"
# Evaluations at steps 10 and 20, and the final record: one writer.
[ "$(wc -l < "$dir/log.jsonl")" -eq 3 ] || { cat "$dir/log.jsonl"; fail "expected 3 log records"; }

"$tapestry" copy-task "${flags[@]}" --steps 30 --resume "$dir/two.ckpt" > "$dir/one-resumed.json"
grep -q '"steps":30' "$dir/one-resumed.json" || fail "1 process did not resume to step 30"

two_ranks "$tapestry" copy-task "${flags[@]}" --steps 30 --distributed --resume "$dir/two.ckpt" \
  --save "$dir/two-resumed.ckpt" > "$dir/two-resumed.json"
grep -q '"steps":30' "$dir/two-resumed.json" || fail "2 ranks did not resume to step 30"

two_ranks "$tapestry" copy-task "${flags[@]}" --steps 30 --distributed --save "$dir/straight.ckpt" > /dev/null
"$check" compare "$dir/two-resumed.ckpt" "$dir/straight.ckpt" --atol 0 --rtol 0 ||
  fail "2 ranks resumed at step 20 differ from 2 ranks that trained to step 30 without a break"
echo "resume: passed"
