"""A synthetic parallel corpus of any size for `tfnmt bench --bench=data`: Multi30k's training
pairs drawn at random and recombined (a third of the pairs join two drawn pairs, side by side,
so lengths vary as in a real corpus), written to a directory as `text:DIR` reads it. Never
commit its output; it is made in a few seconds per million pairs.

    python tools/make_corpus.py --pairs=4500000 --output_dir=/tmp/corpus-4.5M \
        [--multi30k_dir=$TFNMT_MULTI30K_DIR] [--source_lang=en] [--target_lang=de] [--seed=1]

Writes OUTPUT_DIR/train.{src,tgt} (the synthetic pairs) and valid/test.{src,tgt} (Multi30k's
validation and test2016 files, as they are).
"""

import argparse
import os
import random
import shutil


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, required=True)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--multi30k_dir", default=os.environ.get(
        "TFNMT_MULTI30K_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data",
                                           "multi30k")))
    parser.add_argument("--source_lang", default="en")
    parser.add_argument("--target_lang", default="de")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    def lines(split, lang):
        with open(os.path.join(args.multi30k_dir, f"{split}.{lang}"), encoding="utf-8") as f:
            return f.read().splitlines()

    pairs = list(zip(lines("train", args.source_lang), lines("train", args.target_lang)))
    rng = random.Random(args.seed)
    os.makedirs(args.output_dir, exist_ok=True)
    out = {side: open(os.path.join(args.output_dir, f"train.{lang}"), "w", encoding="utf-8")
           for side, lang in (("source", args.source_lang), ("target", args.target_lang))}
    with out["source"], out["target"]:
        for start in range(0, args.pairs, 10_000):
            chunk_s, chunk_t = [], []
            for _ in range(min(10_000, args.pairs - start)):
                s, t = rng.choice(pairs)
                if rng.random() < 1 / 3:
                    s2, t2 = rng.choice(pairs)
                    s, t = f"{s} {s2}", f"{t} {t2}"
                chunk_s.append(s)
                chunk_t.append(t)
            out["source"].write("\n".join(chunk_s) + "\n")
            out["target"].write("\n".join(chunk_t) + "\n")
    for split, name in (("val", "valid"), ("test_2016_flickr", "test")):
        for lang in (args.source_lang, args.target_lang):
            shutil.copyfile(os.path.join(args.multi30k_dir, f"{split}.{lang}"),
                            os.path.join(args.output_dir, f"{name}.{lang}"))
    print(f"{args.pairs:,} pairs in {args.output_dir}")


if __name__ == "__main__":
    main()
