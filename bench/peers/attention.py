#!/usr/bin/env python3
"""PyTorch's peer of `tapestry bench attention`: one torch.nn.TransformerEncoderLayer(d_model=384,
nhead=6, dim_feedforward=1536, dropout=0, batch_first=True), forward + backward of
sum(output * P) with a fixed random P, per sequence length; median milliseconds of `repeats` runs
after `warmup`, each bracketed by torch.cuda.synchronize() on a GPU.

Settings come from the flags or, with --like FILE, from the JSON that `tapestry bench attention
--json FILE` wrote (device, lengths, batch, repeats, warmup, threads), so both run alike. Prints one
JSON row per line; --json FILE writes {"benchmark", "framework", "version", "device", "threads",
"config", "rows"}. Peak memory is measured on a GPU only (torch.cuda.max_memory_allocated); on the
CPU PyTorch keeps no such statistic and the field is null.
"""
import argparse
import json
import sys

import torch

from common import failure_status, settings, time_runs


def measure(n, config, device):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=384, nhead=6, dim_feedforward=1536, dropout=0.0,
                                             batch_first=True).to(device)
    x = torch.randn(config["batch"], n, 384, device=device)
    projection = torch.randn(config["batch"], n, 384, device=device)

    def step():
        layer.zero_grad(set_to_none=True)
        (layer(x) * projection).sum().backward()

    ms, times, peak = time_runs(step, config, device)
    elements = n * config["batch"]
    return {"type": "full", "n": n, "batch": config["batch"], "status": "ok", "ms": ms, "ms_runs": times,
            "us_per_element": ms * 1000 / elements, "peak_bytes": peak,
            "bytes_per_element": peak / elements if peak is not None else None}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--like", help="take the settings from this `tapestry bench attention` JSON file")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--lengths", type=lambda s: [int(v) for v in s.split(",")],
                        default=[512, 1024, 2048, 4096, 8192])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (torch.set_num_threads)")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    config = settings(args, "lengths")
    torch.set_num_threads(config["threads"])
    device = torch.device(config["device"])

    rows = []
    for n in config["lengths"]:
        try:
            row = measure(n, config, device)
        except (RuntimeError, MemoryError) as e:
            row = {"type": "full", "n": n, "batch": config["batch"], "status": failure_status(e), "ms": None}
        if device.type == "cuda":
            torch.cuda.empty_cache()
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "attention", "framework": "pytorch", "version": torch.__version__,
                       "device": config["device"], "threads": torch.get_num_threads(),
                       "config": {k: config[k] for k in ("lengths", "batch", "repeats", "warmup")}
                       | {"d_model": 384, "heads": 6, "d_ff": 1536, "dropout": 0.0},
                       "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
