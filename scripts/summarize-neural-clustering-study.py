#!/usr/bin/env python3
"""The tables of docs/RESULTS.md's neural-clustering study, from the raw files scripts/study-neural-clustering
writes (DIR/runs.jsonl and DIR/<arm>-<seed>.jsonl): per arm, the last step's score over the seeds
(mean ± std, each seed's value), and from the last logged inspection, averaged over the seeds, layer 0's
unweighted L1 and L2, the Frobenius norm of its W_C, the ratio of the clustering losses' gradient (µ·L1 and
ν·L2 together) to the task's at its input, and its largest cluster's share of the words.

  scripts/summarize-neural-clustering-study.py DIR [--metric masked_accuracy]
"""
import argparse
import collections
import json
import math
import os
import statistics


def mean_std(values):
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return "—"
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.4f} ± {std:.4f}"


def mean(values):
    values = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.mean(values) if values else float("nan")


def number(x):
    if math.isnan(x):
        return "—"
    if x == 0 or 1e-3 <= abs(x) < 1e4:
        return f"{x:.3g}"
    return f"{x:.2e}"


def last_inspection(path):
    last = None
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            if row.get("event") == "inspect":
                last = row
    return last


def layer_figures(inspection):
    """Layer 0 of the first stack: L1, L2, ‖W_C‖, the losses'/task's gradient ratio at its input, largest share."""
    layer = inspection["inspect"]["layers"][0]
    norms = next((g["norms"] for g in layer["gradients"] if g["target"] == "input" and g["head"] is None), {})
    losses = math.hypot(norms.get("mu_l1", 0.0), norms.get("nu_l2", 0.0))
    task = norms.get("task", 0.0)
    ratio = losses / task if task > 0 else float("nan")
    return (layer.get("l1"), layer.get("l2"), layer.get("w_c_norm", float("nan")), ratio,
            layer["clusters"][0]["largest_share"], inspection.get("step"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--metric", default="masked_accuracy")
    args = parser.parse_args()
    runs = collections.defaultdict(list)
    with open(os.path.join(args.dir, "runs.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            runs[row["arm"]].append(row)
    print(f"| arm | {args.metric}, mean ± std | per seed | L1 | L2 | ‖W_C‖ | losses/task gradient at the input | largest share | step |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for arm, rows in runs.items():
        rows.sort(key=lambda r: r["seed"])
        scores = [r.get(args.metric) for r in rows]
        figures = []
        for r in rows:
            inspection = last_inspection(os.path.join(args.dir, f"{arm}-{r['seed']}.jsonl"))
            if inspection:
                figures.append(layer_figures(inspection))
        columns = [number(mean([f[i] for f in figures])) for i in range(5)]
        step = figures[0][5] if figures else "—"
        per_seed = " / ".join(f"{s:.4f}" for s in scores)
        print(f"| {arm} | {mean_std(scores)} | {per_seed} | " + " | ".join(columns) + f" | {step} |")


if __name__ == "__main__":
    main()
