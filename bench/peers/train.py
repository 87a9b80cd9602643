#!/usr/bin/env python3
"""PyTorch's peer of `tapestry bench train`: the masked copy task's model with full attention —
token embedding (vocabulary 12) + sinusoidal positions, torch.nn.TransformerEncoder of 4
TransformerEncoderLayer(d_model=192, nhead=6, dim_feedforward=768, dropout=0.1, batch_first=True),
a linear head, cross-entropy over every position, torch.optim.RAdam(lr=1e-3) — timed per training
step (zero_grad, forward, backward, step) for sequences of N = 2L + 2; median milliseconds of
`repeats` steps after `warmup`, each bracketed by torch.cuda.synchronize() on a GPU.

Settings come from the flags or, with --like FILE, from the JSON that `tapestry bench train --json
FILE` wrote (device, copy lengths, batch, repeats, warmup, threads). Prints one JSON row per line;
--json FILE writes {"benchmark", "framework", "version", "device", "threads", "config", "rows"}.
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F

from common import autocast, failure_status, independent_layers, settings, sinusoids, time_runs

VOCABULARY, SEPARATOR, MASK, SYMBOLS = 12, 0, 11, 10
D_MODEL, HEADS, D_FF, LAYERS, DROPOUT, LR = 192, 6, 768, 4, 0.1, 1e-3


def copy_task_batch(batch, length, generator):
    """0 w 0 w with about 20% of each copy masked, at positions visible in the other copy."""
    w = torch.randint(1, SYMBOLS + 1, (batch, length), generator=generator)
    zero = torch.full((batch, 1), SEPARATOR, dtype=torch.long)
    target = torch.cat([zero, w, zero, w], dim=1)
    source = target.clone()
    masked = round(0.2 * length)
    for b in range(batch):
        order = torch.randperm(length, generator=generator)
        source[b, 1 + order[:masked]] = MASK
        source[b, length + 2 + order[masked:2 * masked]] = MASK
    return source, target


class CopyModel(torch.nn.Module):
    def __init__(self, length):
        super().__init__()
        self.embedding = torch.nn.Embedding(VOCABULARY, D_MODEL)
        self.register_buffer("positions", sinusoids(length, D_MODEL))
        layer = torch.nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, dropout=DROPOUT, batch_first=True)
        self.encoder = independent_layers(torch.nn.TransformerEncoder(layer, LAYERS))
        self.head = torch.nn.Linear(D_MODEL, VOCABULARY)

    def loss(self, source, target):
        x = self.embedding(source) + self.positions[: source.shape[1]]
        logits = self.head(self.encoder(x))
        return F.cross_entropy(logits.reshape(-1, VOCABULARY), target.reshape(-1))


def measure(length, config, device):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    n = 2 * length + 2
    model = CopyModel(n).to(device)
    model.train()
    optimizer = torch.optim.RAdam(model.parameters(), lr=LR)
    source, target = (t.to(device) for t in copy_task_batch(config["batch"], length, generator))
    loss = None

    def step():
        nonlocal loss
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, config["precision"]):
            loss = model.loss(source, target)
        loss.backward()
        optimizer.step()

    ms, times, peak = time_runs(step, config, device)
    return {"type": "full", "copy_length": length, "n": n, "batch": config["batch"], "status": "ok", "ms": ms,
            "ms_runs": times, "tokens_per_s": config["batch"] * n / (ms * 1e-3), "peak_bytes": peak,
            "loss": loss.item()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--like", help="take the settings from this `tapestry bench train` JSON file")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--copy-lengths", type=lambda s: [int(v) for v in s.split(",")], default=[31, 127])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (torch.set_num_threads)")
    parser.add_argument("--precision", choices=["float32", "bf16"], default="float32",
                        help="bf16: the forward pass under torch.autocast to bfloat16")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    config = settings(args, "copy_lengths")
    torch.set_num_threads(config["threads"])
    device = torch.device(config["device"])

    rows = []
    for length in config["copy_lengths"]:
        try:
            row = measure(length, config, device)
        except (RuntimeError, MemoryError) as e:
            row = {"type": "full", "copy_length": length, "n": 2 * length + 2, "batch": config["batch"],
                   "status": failure_status(e), "ms": None}
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "train", "framework": "pytorch", "version": torch.__version__,
                       "device": config["device"], "threads": torch.get_num_threads(),
                       "config": {k: config[k] for k in ("copy_lengths", "batch", "repeats", "warmup", "precision")}
                       | {"vocabulary": VOCABULARY, "d_model": D_MODEL, "heads": HEADS, "d_ff": D_FF,
                          "layers": LAYERS, "dropout": DROPOUT, "optimizer": "RAdam", "lr": LR},
                       "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
