#!/usr/bin/env python3
"""PyTorch's peer of a `tapestry translate train` run: the same model (bench/peers/translate.py's
Translator, full attention), the same data and subwords, the same batching rule, loss, optimizer,
schedule and number of steps, then greedy and beam search on the evaluation split, scored with
sacreBLEU (the definition Tapestry's metrics/bleu reproduces). For docs/RESULTS.md's side-by-side
BLEU of full-size runs; `tapestry bench translate` and translate.py compare step times alone.

Every setting is read from the run itself: --like CKPT takes a checkpoint that `tapestry translate
train --save CKPT` wrote (its JSON header holds the run's model and training settings, its
SentencePiece model lies beside it as CKPT.spm). What is the same: the pieces (CKPT.spm, ids 0-3 pad,
unk, bos, eos); the training pairs (the split's first --max-pairs, pairs with an empty side or a side
over --max-length pieces left out); source = pieces + eos, target = bos + pieces → pieces + eos;
batches of pairs sorted by length, max(source, target) tokens, packed while rows × longest ≤
--max-tokens, in shuffled order, a new shuffle each epoch; label-smoothed cross-entropy over the
target tokens (padding ignored); Adam with the run's lr, betas, eps and weight decay; the
inverse-sqrt schedule lr · min(s / W, √(W / s)); gradient clipping at --clip when set; searches with
at most ceil(max_ratio · source pieces) + 10 tokens, beam scores log p / T^lenpen (T counting eos).
What differs: the random draws (initial weights, dropout, the shuffles), which no two frameworks
share, and the attention projections' initialisation (PyTorch's Xavier-uniform q, k, v with zero
biases; Tapestry's as nn.Linear's; docs/RESULTS.md measures what that changes at the start).

The run's checkpoint records neither its search settings nor its number of steps: --lenpen and
--max-ratio default to `tapestry translate`'s, --beam (default 5) is the beam scored beside greedy
search, and the steps default to the step the checkpoint was saved at (the last, for a run's --save).
Searches run one sentence at a time and re-run the decoder on the prefix (no key/value cache): the
peer's decoding time is not a figure to compare with Tapestry's.

Usage: translate_train.py --like CKPT [--data DIR] [--device cuda] [--split test] [--steps N]
                          [--hypotheses PREFIX] --json OUT
Prints progress to stderr and one JSON object (also written to --json): BLEU greedy and beam, the
training time, target tokens per second, parameters. Without sacreBLEU, --hypotheses PREFIX writes
the translations instead (BLEU null), and `tapestry translate score --hypotheses PREFIX.greedy.txt
--references DATA/test.en` scores them with Tapestry's implementation of the same definition.
"""
import argparse
import json
import math
import os
import random
import struct
import sys
import time

import torch
import torch.nn.functional as F

from translate import Translator

PAD, BOS, EOS = 0, 2, 3


def read_settings(path):
    """The run's recorded settings: {flag without dashes: value}, model and training together."""
    if not os.path.isfile(path):
        raise SystemExit(f"translate_train: --like: no checkpoint '{path}'")
    if not os.path.isfile(path + ".spm"):
        raise SystemExit(f"translate_train: --like: '{path}' has no SentencePiece model beside it ('{path}.spm')")
    with open(path, "rb") as f:
        head = f.read(20)
        if len(head) < 20 or head[:8] != b"TAPESTRY":
            raise SystemExit(f"translate_train: '{path}' is not a Tapestry checkpoint (docs/CHECKPOINT.md)")
        (length,) = struct.unpack("<Q", head[12:20])
        header = json.loads(f.read(length))
    run = header.get("metadata", {})
    if run.get("task") != "translate":
        raise SystemExit(f"translate_train: '{path}' is not a translation run (task {run.get('task')!r})")
    return {**run["model"], **run["training"], "step": run["step"]}


def keyed(text):
    """'adam:lr=5e-4,beta2=0.98' -> ('adam', {'lr': 5e-4, 'beta2': 0.98})."""
    name, _, rest = text.partition(":")
    return name, {k: float(v) for k, v in (item.split("=") for item in rest.split(",") if item)}


def read_pairs(data, split, source_lang, target_lang):
    stem = os.path.join(data, split + ".")
    for suffix in (source_lang, target_lang):
        if not os.path.isfile(stem + suffix):
            raise SystemExit(f"translate_train: no file '{stem}{suffix}' (--data, or `make data`)")
    with open(stem + source_lang, encoding="utf-8") as f:
        sources = f.read().split("\n")
    with open(stem + target_lang, encoding="utf-8") as f:
        targets = f.read().split("\n")
    if sources and sources[-1] == "" and targets and targets[-1] == "":
        sources, targets = sources[:-1], targets[:-1]
    if len(sources) != len(targets):
        raise SystemExit(f"translate_train: {stem}{source_lang} has {len(sources)} lines, "
                         f"{stem}{target_lang} {len(targets)}")
    return list(zip(sources, targets))


def epoch_batches(lengths, max_tokens, rng):
    """Shuffle, sort by length (stable), pack rows while rows × longest ≤ max_tokens, shuffle the batches."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    order.sort(key=lambda i: lengths[i])
    batches, batch, longest = [], [], 0
    for i in order:
        if batch and (len(batch) + 1) * max(longest, lengths[i]) > max_tokens:
            batches.append(batch)
            batch, longest = [], 0
        batch.append(i)
        longest = max(longest, lengths[i])
    batches.append(batch)
    rng.shuffle(batches)
    return batches


def pad(rows, device):
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out.to(device)


@torch.no_grad()
def search(model, source, max_length, beam, lenpen, device):
    """One sentence: beam search as Tapestry's (nn/decode/search.h); beam 1 is greedy search."""
    src = pad([source], device)
    memory = model.encode(src).expand(beam, -1, -1)
    live = [([BOS], 0.0)]  # (tokens with bos, log p)
    finished = []
    for t in range(1, max_length + 1):
        prefixes = pad([tokens for tokens, _ in live], device)
        logp = F.log_softmax(model.decode(prefixes, memory[: len(live)])[:, -1].float(), dim=-1)
        candidates = (torch.tensor([lp for _, lp in live], device=device)[:, None] + logp).flatten()
        top = torch.topk(candidates, min(2 * beam, candidates.numel()))
        extended = []
        for value, index in zip(top.values.tolist(), top.indices.tolist()):
            parent, token = divmod(index, logp.shape[1])
            tokens = live[parent][0] + [token]
            if token == EOS or t == max_length:
                finished.append((tokens[1:-1] if token == EOS else tokens[1:], value / t ** lenpen))
            else:
                extended.append((tokens, value))
            if len(extended) == beam or len(finished) >= beam:
                break
        if len(finished) >= beam or not extended:
            break
        live = extended
    return max(finished, key=lambda h: h[1])[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--like", required=True, help="a checkpoint of the `tapestry translate train` run to mirror")
    parser.add_argument("--data", help="the corpus folder (default: the run's --data under $TAPESTRY_DATA)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--split", default="test", help="the split scored (valid, test)")
    parser.add_argument("--sentences", type=int, default=0, help="score its first N pairs (0: all)")
    parser.add_argument("--steps", type=int, help="training steps (default: the step the checkpoint was saved at)")
    parser.add_argument("--beam", type=int, default=5, help="the beam search's width (greedy search is scored too)")
    parser.add_argument("--lenpen", type=float, default=1.0, help="the beam search's length penalty exponent")
    parser.add_argument("--max-ratio", type=float, default=1.5,
                        help="translations have at most ceil(ratio x source pieces) + 10 pieces")
    parser.add_argument("--seconds", type=float, default=0,
                        help="stop training after this many seconds, then score (0: train every step)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the result to this file")
    parser.add_argument("--hypotheses",
                        help="write the translations to PREFIX.greedy.txt and PREFIX.beam<N>.txt (one a line), "
                             "which `tapestry translate score` scores where sacreBLEU is not installed")
    args = parser.parse_args()

    import sentencepiece
    try:
        import sacrebleu
    except ImportError:
        if not args.hypotheses:
            raise SystemExit("translate_train: sacreBLEU is not installed: give --hypotheses PREFIX to write the "
                             "translations, then score them with `tapestry translate score`")
        sacrebleu = None

    s = read_settings(args.like)
    data = args.data or os.path.join(os.environ.get("TAPESTRY_DATA", os.path.expanduser("~/.cache/tapestry/data")),
                                     s["data"])
    sp = sentencepiece.SentencePieceProcessor(model_file=args.like + ".spm")
    if sp.get_piece_size() != s["vocab-size"]:
        raise SystemExit(f"translate_train: {args.like}.spm holds {sp.get_piece_size()} pieces, the run {s['vocab-size']}")
    if s["encoder-attention"] != "full" or s["decoder-attention"] != "full":
        print("translate_train: the peer has full attention only; the run's "
              f"{s['encoder-attention']} / {s['decoder-attention']} is compared with it", file=sys.stderr)
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)

    pairs = read_pairs(data, "train", s["source-lang"], s["target-lang"])
    if s["max-pairs"] > 0:
        pairs = pairs[: s["max-pairs"]]
    train = []
    for source, target in pairs:
        src, tgt = sp.encode(source), sp.encode(target)
        if src and tgt and len(src) <= s["max-length"] and len(tgt) <= s["max-length"]:
            train.append((src + [EOS], [BOS] + tgt, tgt + [EOS]))
    lengths = [max(len(src), len(out)) for src, _, out in train]
    evaluation = read_pairs(data, args.split, s["source-lang"], s["target-lang"])
    if args.sentences > 0:
        evaluation = evaluation[: args.sentences]
    sources = [sp.encode(source) for source, _ in evaluation]
    longest = max(max(lengths), max(math.ceil(args.max_ratio * len(x)) + 10 for x in sources) + 1)

    c = {"d_model": s["heads"] * s["head-dim"], "heads": s["heads"], "d_ff": s["ff"], "dropout": s["dropout"],
         "vocabulary": s["vocab-size"], "encoder_layers": s["encoder-layers"], "decoder_layers": s["decoder-layers"],
         "tie_output": s["tie-output"]}
    model = Translator(c, longest).to(device)
    parameters = sum(p.numel() for p in model.parameters())
    name, o = keyed(s["optimizer"])
    if name != "adam":
        raise SystemExit(f"translate_train: the peer trains with Adam; the run used {s['optimizer']}")
    optimizer = torch.optim.Adam(model.parameters(), lr=o.get("lr", 1e-3), betas=(o.get("beta1", 0.9), o.get("beta2", 0.999)),
                                 eps=o.get("eps", 1e-8), weight_decay=o.get("weight_decay", 0.0))
    schedule_name, so = keyed(s["schedule"])
    if schedule_name not in ("inverse-sqrt", "constant"):
        raise SystemExit(f"translate_train: the peer has the inverse-sqrt and constant schedules; the run used {s['schedule']}")
    warmup = max(1.0, so.get("warmup", 0.0))
    rate = (lambda step: min(step / warmup, math.sqrt(warmup / step))) if schedule_name == "inverse-sqrt" else (lambda step: 1.0)
    steps = args.steps or s["step"]
    print(f"translate_train: {len(train)} training pairs, {len(evaluation)} {args.split} pairs, {parameters} parameters, "
          f"{steps} steps on {device}", file=sys.stderr)

    model.train()
    tokens, start, batches, epoch, trained = 0, time.time(), [], 0, 0
    for step in range(1, steps + 1):
        if args.seconds and time.time() - start > args.seconds:
            print(f"translate_train: stopped at step {trained} of {steps} after --seconds {args.seconds:g}",
                  file=sys.stderr)
            break
        if not batches:
            batches = epoch_batches(lengths, s["max-tokens"], rng)
            epoch += 1
        rows = [train[i] for i in batches.pop()]
        src, tgt_in, tgt_out = (pad([r[k] for r in rows], device) for k in range(3))
        for group in optimizer.param_groups:
            group["lr"] = o.get("lr", 1e-3) * rate(step)
        optimizer.zero_grad(set_to_none=True)
        logits = model(src, tgt_in, src == PAD, tgt_in == PAD)
        loss = F.cross_entropy(logits.reshape(-1, c["vocabulary"]), tgt_out.reshape(-1), ignore_index=PAD,
                               label_smoothing=s["label-smoothing"])
        loss.backward()
        if s.get("clip", 0) > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), s["clip"])
        optimizer.step()
        tokens += sum(len(r[2]) for r in rows)
        trained = step
        if step % 100 == 0 or step == steps:
            print(f"translate_train: step {step}/{steps}, epoch {epoch}, loss {loss.item():.4f}, "
                  f"{time.time() - start:.0f} s", file=sys.stderr, flush=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.time() - start

    model.eval()
    references = [target for _, target in evaluation]
    result = {"framework": "pytorch", "version": torch.__version__, "device": str(device), "like": args.like,
              "split": args.split, "sentences": len(evaluation), "steps": trained, "parameters": parameters,
              "train_seconds": seconds, "target_tokens_per_second": tokens / seconds, "final_train_loss": loss.item()}
    for label, beam in (("greedy", 1), ("beam", args.beam)):
        start = time.time()
        hypotheses = [sp.decode(search(model, x + [EOS], math.ceil(args.max_ratio * len(x)) + 10, beam,
                                       args.lenpen, device)) for x in sources]
        result[f"decode_seconds_{label}"] = time.time() - start
        result[f"bleu_{label}"] = sacrebleu.corpus_bleu(hypotheses, [references]).score if sacrebleu else None
        result[f"beam_{label}"] = beam
        if args.hypotheses:
            path = f"{args.hypotheses}.{'greedy' if beam == 1 else f'beam{beam}'}.txt"
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(h + "\n" for h in hypotheses)
            result[f"hypotheses_{label}"] = path
    print(json.dumps(result), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
