"""Encode Multi30k en-de train/val with the joint SentencePiece model into space-separated pieces
and write the 4,000-piece vocabulary in each peer toolkit's format. Idempotent: files that
already exist are kept.

    python prepare_data.py --spm runs/transformer-small-en-de/spm.model --raw ../shared/data/multi30k \
                           --out ../peer/data

Writes under --out: {train,val}.{en,de} (pieces), vocab.pieces.tsv (piece<TAB>train count, in
SentencePiece id order, control pieces left out), dict.txt (fairseq: "piece count") and
vocab.onmt (OpenNMT-py: "piece<TAB>count"). Each toolkit adds its own 4 specials (pad, unk,
bos, eos) to the 3,996 ordinary pieces, so both vocabularies have 4,000 entries like the
SentencePiece model.
"""

import argparse
import collections
import os

import sentencepiece as spm

SPLITS = ("train", "val")
LANGS = ("en", "de")


def write_atomic(path, lines):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spm", required=True)
    ap.add_argument("--raw", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    sp = spm.SentencePieceProcessor(model_file=a.spm)

    for split in SPLITS:
        for lang in LANGS:
            dst = os.path.join(a.out, f"{split}.{lang}")
            if os.path.exists(dst):
                continue
            with open(os.path.join(a.raw, f"{split}.{lang}"), encoding="utf-8") as f:
                raw = [line.rstrip("\n") for line in f]
            write_atomic(dst, (" ".join(sp.encode(s, out_type=str)) for s in raw))
            print(f"encoded {split}.{lang}: {len(raw)} lines -> {dst}")

    vocab_files = [os.path.join(a.out, n) for n in ("vocab.pieces.tsv", "dict.txt", "vocab.onmt")]
    if all(os.path.exists(p) for p in vocab_files):
        return
    counts = collections.Counter()
    for lang in LANGS:
        with open(os.path.join(a.out, f"train.{lang}"), encoding="utf-8") as f:
            for line in f:
                counts.update(line.split())
    # Every ordinary piece of the model, in id order; specials (<pad>, <unk>, <s>, </s>) are
    # the toolkits' own. A piece unseen in train keeps count 1 so no toolkit drops it.
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
              if not (sp.is_control(i) or sp.is_unknown(i))]
    unknown = set(counts) - set(pieces)
    if unknown:
        raise SystemExit(f"pieces outside the model: {sorted(unknown)[:10]}")
    rows = [(p, max(counts[p], 1)) for p in pieces]
    write_atomic(vocab_files[0], (f"{p}\t{c}" for p, c in rows))
    write_atomic(vocab_files[1], (f"{p} {c}" for p, c in rows))
    write_atomic(vocab_files[2], (f"{p}\t{c}" for p, c in rows))
    print(f"vocabulary: {len(rows)} pieces + 4 specials = {len(rows) + 4} "
          f"({sum(1 for p in pieces if counts[p] == 0)} unseen in train)")


if __name__ == "__main__":
    main()
