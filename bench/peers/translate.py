#!/usr/bin/env python3
"""PyTorch's peer of `tapestry bench translate`: one training step of the translation model with full
attention, layer for layer as Tapestry's models::Translator — one embedding table (V, D), N(0, 1/D),
padding id 0, shared by source and target, scaled by √D, plus sinusoidal positions (no dropout
there); torch.nn.TransformerEncoder and TransformerDecoder of post-norm TransformerEncoderLayer /
TransformerDecoderLayer (ReLU, dropout on each sublayer's output and inside the feed-forward block,
LayerNorm ε 1e-5, no final LayerNorm) with dropout on the attention weights switched off, as
Tapestry has none; the decoder's self-attention causal; the output projection tied with the
embedding table (no bias) when the preset ties it, else its own Linear; label-smoothed
cross-entropy (padding id 0 ignored); torch.optim.Adam with the preset's lr, betas, eps and weight
decay. Timed per step (zero_grad, forward, loss, backward, step) on a fixed synthetic batch: B
sentences of S source and T target tokens, each drawn uniformly from [4, V), no padding; median
milliseconds of `repeats` steps after `warmup`, each bracketed by torch.cuda.synchronize() on a GPU.

Every setting comes from the JSON that `tapestry bench translate --json FILE` wrote (--like FILE):
model sizes, optimizer, device, shapes, repeats, warm-up and threads. The model's parameter count
must equal Tapestry's (its full-attention row): a mismatch is an error (exit 1). Prints the row as
JSON; --json FILE writes {"benchmark", "framework", "version", "device", "threads", "config", "rows"}.
"""
import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F

from common import autocast, failure_status, independent_layers, sinusoids, time_runs

FIRST_PIECE = 4  # ids 0-3: padding, unknown, bos, eos


def layer_kwargs(c):
    return dict(d_model=c["d_model"], nhead=c["heads"], dim_feedforward=c["d_ff"], dropout=c["dropout"],
                activation="relu", layer_norm_eps=1e-5, batch_first=True, norm_first=False)


def no_attention_dropout(stack):
    """Tapestry's attention has no dropout on its weights; PyTorch's MultiheadAttention reads this float."""
    for layer in stack.layers:
        for name in ("self_attn", "multihead_attn"):
            if hasattr(layer, name):
                getattr(layer, name).dropout = 0.0
    return stack


class Translator(torch.nn.Module):
    def __init__(self, c, length):
        super().__init__()
        d = c["d_model"]
        self.scale = math.sqrt(d)
        self.embedding = torch.nn.Embedding(c["vocabulary"], d, padding_idx=0)
        torch.nn.init.normal_(self.embedding.weight, std=1 / math.sqrt(d))
        self.register_buffer("positions", sinusoids(length, d))
        self.encoder = independent_layers(no_attention_dropout(torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(**layer_kwargs(c)), c["encoder_layers"], enable_nested_tensor=False)))
        self.decoder = independent_layers(no_attention_dropout(torch.nn.TransformerDecoder(
            torch.nn.TransformerDecoderLayer(**layer_kwargs(c)), c["decoder_layers"])))
        self.output = None if c["tie_output"] else torch.nn.Linear(d, c["vocabulary"])

    def embed(self, tokens):
        return self.embedding(tokens) * self.scale + self.positions[: tokens.shape[1]]

    def encode(self, source, source_padding=None):
        """The encoder's output; source_padding (B, S) bool is True at padding."""
        return self.encoder(self.embed(source), src_key_padding_mask=source_padding)

    def decode(self, target_in, memory, source_padding=None, target_padding=None):
        """Next-token logits at every target position (causal self-attention)."""
        t = target_in.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=target_in.device), diagonal=1)  # True: masked
        hidden = self.decoder(self.embed(target_in), memory, tgt_mask=causal, tgt_key_padding_mask=target_padding,
                              memory_key_padding_mask=source_padding)
        return self.output(hidden) if self.output is not None else F.linear(hidden, self.embedding.weight)

    def forward(self, source, target_in, source_padding=None, target_padding=None):
        return self.decode(target_in, self.encode(source, source_padding), source_padding, target_padding)


def measure(c, device):
    torch.manual_seed(c["seed"])
    generator = torch.Generator().manual_seed(c["seed"])
    b, s, t, v = c["batch"], c["source_length"], c["target_length"], c["vocabulary"]
    model = Translator(c, max(s, t)).to(device)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"],
                                 weight_decay=c["weight_decay"])
    source, target_in, target_out = (torch.randint(FIRST_PIECE, v, shape, generator=generator).to(device)
                                     for shape in ((b, s), (b, t), (b, t)))
    loss = None

    def step():
        nonlocal loss
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, c.get("precision", "float32")):
            logits = model(source, target_in)
            loss = F.cross_entropy(logits.reshape(-1, v), target_out.reshape(-1), ignore_index=0,
                                   label_smoothing=c["label_smoothing"])
        loss.backward()
        optimizer.step()

    parameters = sum(p.numel() for p in model.parameters())
    ms, times, peak = time_runs(step, c, device)
    return {"type": "full", "batch": b, "source_length": s, "target_length": t, "parameters": parameters,
            "status": "ok", "ms": ms, "ms_runs": times, "tokens_per_s": b * t / (ms * 1e-3), "peak_bytes": peak,
            "loss": loss.item()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--like", required=True, help="take every setting from this `tapestry bench translate` JSON")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    with open(args.like) as f:
        doc = json.load(f)
    c = doc["config"]
    torch.set_num_threads(doc["threads"])
    device = torch.device(doc["device"])

    try:
        row = measure(c, device)
    except (RuntimeError, MemoryError) as e:
        row = {"type": "full", "batch": c["batch"], "source_length": c["source_length"],
               "target_length": c["target_length"], "status": failure_status(e), "ms": None}
    print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "translate", "framework": "pytorch", "version": torch.__version__,
                       "device": doc["device"], "threads": torch.get_num_threads(), "config": c, "rows": [row]},
                      f, indent=2)
    tapestry = [r["parameters"] for r in doc["rows"] if r["type"] == "full" and "parameters" in r]
    if "parameters" in row and tapestry:
        same = tapestry[0] == row["parameters"]
        print(f"parameters: Tapestry {tapestry[0]}, PyTorch {row['parameters']}"
              f"{'' if same else ' -- the models differ: the times are not comparable'}", flush=True)
        if not same:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
