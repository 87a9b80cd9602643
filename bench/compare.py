#!/usr/bin/env python3
"""Puts the benchmark JSON files of one `make bench` run side by side.

Reads, from DIR (default build/bench): ops.json, attention.json, train.json, translate.json (written
by `tapestry bench ...`) and attention-torch.json, train-torch.json, translate-torch.json
(bench/peers/*.py), any of which may be missing. Prints, per attention and length, Tapestry's time, its ratio against Tapestry's full
attention, and the ratio Tapestry ms / PyTorch ms against PyTorch's full attention at the same
length (PyTorch has no clustered attention: a ratio below 1 for a clustered type means it beats
PyTorch's full attention); the same for training steps; and the op benchmark's summary.
--markdown prints the tables as Markdown (for docs/PERFORMANCE.md).
"""
import argparse
import json
import os
import sys


def load(directory, name):
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def table(headers, rows, markdown):
    cells = [headers] + [[str(c) for c in row] for row in rows]
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in cells[1:]]
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                     for row in cells)


def status_or(row, value):
    return value if row.get("status") == "ok" else row.get("status", "?")


def canonical_device(device):
    """PyTorch's "cuda" is Tapestry's "cuda:0"."""
    return "cuda:0" if device == "cuda" else device


def describe(doc, peer):
    text = f"{doc['benchmark']}: Tapestry {doc['commit']} on {doc['device']} ({doc['device_name']}), " \
           f"{doc['threads']} thread(s)" \
           + (f" ({doc['cpu_capability']})" if doc["device"] == "cpu" and "cpu_capability" in doc else "") \
           + f", {doc['date']}"
    if peer:
        text += f"; PyTorch {peer['version']} on {peer['device']}, {peer['threads']} thread(s)"
        # CPU threads set the speed on the CPU only; on a GPU they merely launch the kernels.
        threads_differ = doc["device"] == "cpu" and peer["threads"] != doc["threads"]
        if canonical_device(peer["device"]) != canonical_device(doc["device"]) or threads_differ:
            text += "  ** settings differ: ratios are not like for like **"
    return text


def attention(doc, peer, markdown):
    torch_ms = {r["n"]: r["ms"] for r in (peer or {}).get("rows", []) if r.get("status") == "ok"}
    rows = []
    for r in doc["rows"]:
        ms = r.get("ms") if r.get("status") == "ok" else None
        pt = torch_ms.get(r["n"])
        rows.append([r["type"], r["n"], status_or(r, fmt(ms, ".2f")), fmt(r.get("us_per_element"), ".1f"),
                     fmt(r.get("ms_vs_full"), ".3f"), fmt(r.get("peak_bytes") and r["peak_bytes"] / 2**20, ".1f"),
                     fmt(r.get("bytes_per_element") and r["bytes_per_element"] / 2**10, ".1f"),
                     fmt(r.get("memory_vs_full"), ".3f"), fmt(pt, ".2f"), fmt(ratio(ms, pt), ".3f")])
    headers = ["type", "N", "ms", "µs/elem", "×full", "peak MiB", "KiB/elem", "memory ×full", "PyTorch full ms",
               "Tapestry/PyTorch"]
    return table(headers, rows, markdown)


def train(doc, peer, markdown):
    torch_ms = {r["n"]: r["ms"] for r in (peer or {}).get("rows", []) if r.get("status") == "ok"}
    rows = []
    for r in doc["rows"]:
        ms = r.get("ms") if r.get("status") == "ok" else None
        pt = torch_ms.get(r["n"])
        rows.append([r.get("model", "copy"), r["type"], r.get("copy_length", ""), r["n"], r["batch"],
                     status_or(r, fmt(ms, ".2f")), fmt(r.get("ms_vs_full"), ".3f"), fmt(pt, ".2f"),
                     fmt(ratio(ms, pt), ".3f")])
    headers = ["model", "type", "L", "N", "batch", "ms/step", "×full", "PyTorch full ms/step", "Tapestry/PyTorch"]
    return table(headers, rows, markdown)


def translate(doc, peer, markdown):
    shape = lambda r: (r["batch"], r["source_length"], r["target_length"])
    torch_ms = {shape(r): r["ms"] for r in (peer or {}).get("rows", []) if r.get("status") == "ok"}
    rows = []
    for r in doc["rows"]:
        ms = r.get("ms") if r.get("status") == "ok" else None
        pt = torch_ms.get(shape(r))
        rows.append([r["type"], *shape(r), fmt(r.get("parameters"), "d"), status_or(r, fmt(ms, ".2f")),
                     fmt(r.get("ms_vs_full"), ".3f"), fmt(pt, ".2f"), fmt(ratio(ms, pt), ".3f")])
    headers = ["encoder attention", "B", "S", "T", "parameters", "ms/step", "×full", "PyTorch full ms/step",
               "Tapestry/PyTorch"]
    return table(headers, rows, markdown)


def ops(doc, markdown):
    bandwidth, products = [], []
    gpu = doc["device"].startswith("cuda")
    for r in doc["rows"]:
        shape = "×".join(str(d) for d in r["shape"])
        if r["op"] == "matmul":
            unit = 1e3 if gpu else 1.0
            products.append([shape, status_or(r, fmt(r.get("ms"), ".3f")),
                             fmt(r.get("gflop_per_s") and r["gflop_per_s"] / unit, ".2f"),
                             fmt(r.get("reference_gflop_per_s") and r["reference_gflop_per_s"] / unit, ".2f"),
                             fmt(r.get("time_vs_reference"), ".3f")])
        else:
            bandwidth.append([r["op"], shape, status_or(r, fmt(r.get("ms"), ".3f")), fmt(r.get("gb_per_s"), ".1f"),
                              fmt(r.get("fraction_of_copy"), ".2f")])
    flops = "TFLOP/s" if gpu else "GFLOP/s"
    reference = "cuBLAS" if gpu else "cblas_sgemm"
    return (table(["op", "shape", "ms", "GB/s", "× copy"], bandwidth, markdown) + "\n\n" +
            table(["matmul B×M×K×N", "ms", flops, f"{reference} {flops}", "time ×reference"], products, markdown))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", nargs="?", default="build/bench")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args()
    d = args.directory
    found = False
    for name, peer_name, render in (("ops.json", None, None), ("attention.json", "attention-torch.json", attention),
                                    ("train.json", "train-torch.json", train),
                                    ("translate.json", "translate-torch.json", translate)):
        doc = load(d, name)
        if doc is None:
            continue
        found = True
        peer = load(d, peer_name) if peer_name else None
        print(("### " if args.markdown else "== ") + describe(doc, peer) + "\n")
        if peer_name and peer is None:
            print("(PyTorch figures missing: PyTorch is not installed, or its peer did not run)\n")
        print((ops(doc, args.markdown) if render is None else render(doc, peer, args.markdown)) + "\n")
    if not found:
        print(f"compare.py: no benchmark results in {d}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
