"""What the PyTorch peers share: settings read back from Tapestry's JSON, the timing loop, the
status of a failed row and the sinusoidal position table, so that the peers measure the same way
Tapestry's benchmarks do."""

import json
import math
import statistics
import time

import torch


def settings(args, sizes, copy=True):
    """The run's settings: the flags, or, with --like, those of a Tapestry benchmark JSON file.
    `sizes` names the list of sizes ("lengths" or "copy_lengths"); without `copy` (bench train of
    another model than the copy task's, whose sizes are fixed) the file has neither sizes nor batch."""
    config = {"device": args.device, sizes: getattr(args, sizes), "batch": args.batch,
              "repeats": args.repeats, "warmup": args.warmup, "threads": args.threads,
              "precision": getattr(args, "precision", "float32")}
    if args.like:
        with open(args.like) as f:
            doc = json.load(f)
        config.update(device=doc["device"], threads=doc["threads"], repeats=doc["config"]["repeats"],
                      warmup=doc["config"]["warmup"], precision=doc["config"].get("precision", "float32"))
        if copy:
            config.update(batch=doc["config"]["batch"])
            config[sizes] = doc["config"][sizes]
    return config


def autocast(device, precision):
    """The forward pass's precision: torch.autocast to bfloat16 for "bf16" (as `--precision bf16` puts
    Tapestry's forward under its autocast), nothing for "float32"."""
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_runs(step, config, device):
    """`warmup` untimed runs of step(), then `repeats` timed ones, each bracketed by a device
    synchronisation. Returns the median ms, every run's ms and
    the peak of allocated GPU memory over the timed runs (None on the CPU, where PyTorch keeps none)."""
    for _ in range(config["warmup"]):
        step()
    times, peak = [], None
    for _ in range(config["repeats"]):
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        synchronize(device)
        start = time.perf_counter()
        step()
        synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
        if device.type == "cuda":
            peak = max(peak or 0, torch.cuda.max_memory_allocated(device))
    return statistics.median(times), times, peak


def failure_status(e):
    """A failed row's status, worded as Tapestry's: PyTorch reports running out of memory as a
    RuntimeError."""
    message = str(e).splitlines()[0] if str(e) else type(e).__name__
    return "out of memory" if isinstance(e, MemoryError) or "out of memory" in message else "failed: " + message


def sinusoids(length, d_model):
    """Tapestry's SinusoidalPositionalEncoding table (length, d_model): sin at even columns, cos at odd."""
    position = torch.arange(length, dtype=torch.float64).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table.float()


def independent_layers(stack):
    """torch.nn.TransformerEncoder / Decoder deep-copy one layer, so every layer starts with the same
    weights; Tapestry draws each layer's own. Redraw them (each module's own initialisation), so that
    both start alike: with cloned layers translate.py's model started on de-en at loss 7.68 against
    Tapestry's 11.45, with independent ones at 11.06 (docs/RESULTS.md)."""
    for layer in stack.layers:
        for module in layer.modules():
            if isinstance(module, torch.nn.MultiheadAttention):
                module._reset_parameters()
            elif module is not layer and hasattr(module, "reset_parameters"):
                module.reset_parameters()
    return stack
