#!/usr/bin/env python3
"""PyTorch's peer of `tapestry bench train`: one app's model with full attention, timed per training
step (zero_grad, forward, backward, step); median milliseconds of `repeats` steps after `warmup`,
each bracketed by torch.cuda.synchronize() on a GPU. The models, as Tapestry's (apps/bench_train.cpp):

  copy        token embedding (vocabulary 12) + sinusoidal positions, torch.nn.TransformerEncoder of 4
              TransformerEncoderLayer(d_model=192, nhead=6, dim_feedforward=768, dropout=0.1,
              batch_first=True), a linear head, cross-entropy over every position,
              torch.optim.RAdam(lr=1e-3); sequences of N = 2L + 2
  classifier  embedding (vocabulary 8000) + sinusoidal positions, 2 layers of d_model 128, 4 heads,
              feed-forward 256, dropout 0.1, the mean over the positions, a linear map to 15 classes,
              cross-entropy, Adam(lr=1e-3); 8 documents of 2048 tokens
  speech      40 mel bins, 4 frames stacked into one position, a linear map (160 -> 64) + sinusoidal
              positions, 4 layers of d_model 64, 4 heads, feed-forward 256, dropout 0.1, a linear map
              to 51 classes (50 phonemes and the blank), log_softmax, CTC against 32 phonemes,
              Adam(lr=2e-3); 30 utterances of 260 frames

The inputs are random: a step's time does not depend on their values. Settings come from the flags
or, with --like FILE, from the JSON that `tapestry bench train --json FILE` wrote (model, device,
copy lengths, batch, repeats, warmup, threads, precision). Prints one JSON row per line; --json FILE
writes {"benchmark", "framework", "version", "device", "threads", "config", "rows"}.
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F

from common import autocast, failure_status, independent_layers, settings, sinusoids, time_runs

VOCABULARY, SEPARATOR, MASK, SYMBOLS = 12, 0, 11, 10
D_MODEL, HEADS, D_FF, LAYERS, DROPOUT, LR = 192, 6, 768, 4, 0.1, 1e-3
# classify's default preset (apps/classify.h) on Brown's 15 genres
CLASSIFIER = {"vocabulary": 8000, "classes": 15, "d_model": 128, "heads": 4, "d_ff": 256, "layers": 2,
              "dropout": 0.1, "lr": 1e-3, "batch": 8, "n": 2048}
# asr's default preset (apps/asr.h) on the speech set's 50 phonemes, utterances of its mean length
SPEECH = {"mel_bins": 40, "stack": 4, "labels": 51, "d_model": 64, "heads": 4, "d_ff": 256, "layers": 4,
          "dropout": 0.1, "lr": 2e-3, "batch": 30, "n": 260, "target_phonemes": 32}


def encoder(c):
    layer = torch.nn.TransformerEncoderLayer(c["d_model"], c["heads"], c["d_ff"], dropout=c["dropout"],
                                             batch_first=True)
    return independent_layers(torch.nn.TransformerEncoder(layer, c["layers"]))


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


class ClassifierModel(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embedding = torch.nn.Embedding(c["vocabulary"], c["d_model"])
        self.register_buffer("positions", sinusoids(c["n"], c["d_model"]))
        self.encoder = encoder(c)
        self.head = torch.nn.Linear(c["d_model"], c["classes"])

    def loss(self, tokens, labels):
        x = self.embedding(tokens) + self.positions[: tokens.shape[1]]
        return F.cross_entropy(self.head(self.encoder(x).mean(dim=1)), labels)


class SpeechModel(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.stack = c["stack"]
        self.input = torch.nn.Linear(c["stack"] * c["mel_bins"], c["d_model"])
        self.register_buffer("positions", sinusoids(c["n"] // c["stack"], c["d_model"]))
        self.encoder = encoder(c)
        self.output = torch.nn.Linear(c["d_model"], c["labels"])

    def loss(self, features, targets):
        b, n, f = features.shape
        x = self.input(features.reshape(b, n // self.stack, self.stack * f)) + self.positions
        log_probs = F.log_softmax(self.output(self.encoder(x)), dim=-1)  # (B, N', K)
        positions = torch.full((b,), n // self.stack, dtype=torch.long)
        target_lengths = torch.full((b,), targets.shape[1], dtype=torch.long)
        return F.ctc_loss(log_probs.transpose(0, 1), targets, positions, target_lengths, blank=0)


def time_steps(model, optimizer, loss, config, device):
    """Times training steps of `model` (zero_grad, loss() under the precision's autocast, backward,
    the optimizer's step), as time_runs does; returns its figures and the last loss."""
    last = None

    def step():
        nonlocal last
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, config["precision"]):
            last = loss()
        last.backward()
        optimizer.step()

    ms, times, peak = time_runs(step, config, device)
    return ms, times, peak, last.item()


def measure_app(model_name, config, device):
    """One step of the classifier's or the speech model's, as `tapestry bench train --model`."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    if model_name == "classifier":
        c = CLASSIFIER
        model = ClassifierModel(c)
        inputs = torch.randint(0, c["vocabulary"], (c["batch"], c["n"]), generator=generator)
        targets = torch.randint(0, c["classes"], (c["batch"],), generator=generator)
    else:
        c = SPEECH
        model = SpeechModel(c)
        inputs = torch.randn(c["batch"], c["n"], c["mel_bins"], generator=generator)
        targets = torch.randint(1, c["labels"], (c["batch"], c["target_phonemes"]), generator=generator)
    model = model.to(device)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=c["lr"])
    inputs, targets = inputs.to(device), targets.to(device)
    ms, times, peak, loss = time_steps(model, optimizer, lambda: model.loss(inputs, targets), config, device)
    rate = "frames_per_s" if model_name == "speech" else "tokens_per_s"
    return {"model": model_name, "type": "full", "n": c["n"], "batch": c["batch"], "status": "ok", "ms": ms,
            "ms_runs": times, rate: c["batch"] * c["n"] / (ms * 1e-3), "peak_bytes": peak, "loss": loss}


def measure(length, config, device):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    n = 2 * length + 2
    model = CopyModel(n).to(device)
    model.train()
    optimizer = torch.optim.RAdam(model.parameters(), lr=LR)
    source, target = (t.to(device) for t in copy_task_batch(config["batch"], length, generator))
    ms, times, peak, loss = time_steps(model, optimizer, lambda: model.loss(source, target), config, device)
    return {"model": "copy", "type": "full", "copy_length": length, "n": n, "batch": config["batch"], "status": "ok",
            "ms": ms, "ms_runs": times, "tokens_per_s": config["batch"] * n / (ms * 1e-3), "peak_bytes": peak,
            "loss": loss}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--like", help="take the settings from this `tapestry bench train` JSON file")
    parser.add_argument("--model", choices=["copy", "classifier", "speech"], default="copy",
                        help="the app whose model a step trains (with --like: the file's)")
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
    model_name = args.model
    if args.like:
        with open(args.like) as f:
            model_name = json.load(f)["config"].get("model", "copy")
    config = settings(args, "copy_lengths", copy=model_name == "copy")
    torch.set_num_threads(config["threads"])
    device = torch.device(config["device"])

    if model_name != "copy":
        c = CLASSIFIER if model_name == "classifier" else SPEECH
        try:
            row = measure_app(model_name, config, device)
        except (RuntimeError, MemoryError) as e:
            row = {"model": model_name, "type": "full", "n": c["n"], "batch": c["batch"], "status": failure_status(e),
                   "ms": None}
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"benchmark": "train", "framework": "pytorch", "version": torch.__version__,
                           "device": config["device"], "threads": torch.get_num_threads(),
                           "config": {k: config[k] for k in ("repeats", "warmup", "precision")}
                           | {"model": model_name} | c, "rows": [row]}, f, indent=2)
        return 0

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
                       | {"model": "copy", "vocabulary": VOCABULARY, "d_model": D_MODEL, "heads": HEADS, "d_ff": D_FF,
                          "layers": LAYERS, "dropout": DROPOUT, "optimizer": "RAdam", "lr": LR},
                       "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
