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
import statistics
import sys
import time

import torch


def settings(args):
    config = {"device": args.device, "lengths": args.lengths, "batch": args.batch,
              "repeats": args.repeats, "warmup": args.warmup, "threads": args.threads}
    if args.like:
        with open(args.like) as f:
            doc = json.load(f)
        config.update(device=doc["device"], threads=doc["threads"], lengths=doc["config"]["lengths"],
                      batch=doc["config"]["batch"], repeats=doc["config"]["repeats"],
                      warmup=doc["config"]["warmup"])
    return config


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(n, config, device):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=384, nhead=6, dim_feedforward=1536, dropout=0.0,
                                             batch_first=True).to(device)
    x = torch.randn(config["batch"], n, 384, device=device)
    projection = torch.randn(config["batch"], n, 384, device=device)

    def step():
        layer.zero_grad(set_to_none=True)
        (layer(x) * projection).sum().backward()

    for _ in range(config["warmup"]):
        step()
    times, peak = [], None
    for _ in range(config["repeats"]):
        layer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        synchronize(device)
        start = time.perf_counter()
        step()
        synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
        if device.type == "cuda":
            peak = max(peak or 0, torch.cuda.max_memory_allocated(device))
    ms = statistics.median(times)
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
    config = settings(args)
    torch.set_num_threads(config["threads"])
    device = torch.device(config["device"])

    rows = []
    for n in config["lengths"]:
        try:
            row = measure(n, config, device)
        except (RuntimeError, MemoryError) as e:  # PyTorch reports running out of memory as RuntimeError
            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            status = "out of memory" if isinstance(e, MemoryError) or "out of memory" in message else "failed: " + message
            row = {"type": "full", "n": n, "batch": config["batch"], "status": status, "ms": None}
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
