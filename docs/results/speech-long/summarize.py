#!/usr/bin/env python3
"""The tables of docs/RESULTS.md's speech-long section from run.sh's and timing.sh's JSON files.

  docs/results/speech-long/summarize.py RESULTS_DIR
"""
import json
import os
import statistics
import sys

RUNS = ["full", "clustered-25", "clustered-50", "improved-clustered-25", "improved-clustered-50"]
SEEDS = [0, 1, 2]


def load(folder, name):
    with open(os.path.join(folder, name), encoding="utf-8") as f:
        return json.load(f)


def spread(values):
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"


def main(folder):
    print("| attention | valid PER, best (step) | test PER | test PER per seed | train s "
          "| forward ms, valid, in training | forward ms, test, alone |")
    print("|---|---|---|---|---|---|---|")
    for run in RUNS:
        trained = [load(folder, f"{run}-{s}.json") for s in SEEDS]
        tested = [load(folder, f"{run}-{s}-test.json") for s in SEEDS]
        timed = [load(folder, f"timing-{run}-{r}.json")["forward_ms"] for r in (1, 2, 3)
                 if os.path.exists(os.path.join(folder, f"timing-{run}-{r}.json"))]
        best = spread([t["best_per"] for t in trained])
        steps = ", ".join(str(t["best_step"]) for t in trained)
        per_seed = ", ".join(f"{t['per']:.4f}" for t in tested)
        seconds = ", ".join(f"{t['seconds']:.0f}" for t in trained)
        forward = f"{min(timed):.2f} ({min(timed):.2f}–{max(timed):.2f})" if timed else "—"
        # Every evaluation of the training runs (valid split, in the training process: warm)
        warm = []
        for s in SEEDS:
            with open(os.path.join(folder, f"{run}-{s}.jsonl"), encoding="utf-8") as f:
                warm += [e["forward_ms"] for e in map(json.loads, f) if e.get("event") == "eval"]
        print(f"| {trained[0]['attention']} | {best} ({steps}) | {spread([t['per'] for t in tested])} | "
              f"{per_seed} | {seconds} | {min(warm):.2f} ({len(warm)} evaluations) | {forward} |")
    print()
    print("| trained with full, evaluated with | test PER | per seed |")
    print("|---|---|---|")
    full = [load(folder, f"full-{s}-test.json")["per"] for s in SEEDS]
    print(f"| full | {spread(full)} | {', '.join(f'{p:.4f}' for p in full)} |")
    for run in RUNS[1:]:
        tested = [load(folder, f"full-{s}-as-{run}-test.json") for s in SEEDS]
        pers = [t["per"] for t in tested]
        print(f"| {tested[0]['eval_attention']} | {spread(pers)} | {', '.join(f'{p:.4f}' for p in pers)} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
