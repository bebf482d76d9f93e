"""BLEU of translation files as tfnmt reports it (sacreBLEU, cased, detokenised) beside BLEU as
the Multi30k papers report it (multi-bleu.perl -lc on Moses-tokenised text:
evaluation/bleu.moses_lowercased_bleu), for outputs already written, such as the test
translations kept under docs/results (docs/results/README.md, "The literature's metric").

    python tools/bleu_as_papers.py REFERENCES HYPOTHESES... [--lang=de]

One line per file: sacreBLEU, BLEU as papers report it, the file.
"""

import argparse

from tfnmt.evaluation import bleu


def scores(references, hypotheses, lang):
    """(sacreBLEU, BLEU as papers report it) of `hypotheses` against `references` (lines), as
    `tfnmt evaluate` scores them (the target language's sacreBLEU tokenizer)."""
    found = bleu.score(hypotheses, references, target_lang=lang)
    return found["bleu"], found["bleu_moses_lc"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("references")
    parser.add_argument("hypotheses", nargs="+")
    parser.add_argument("--lang", default="de", help="the target language (Moses' rules)")
    args = parser.parse_args(argv)
    with open(args.references, encoding="utf-8") as f:
        references = f.read().splitlines()
    for path in args.hypotheses:
        with open(path, encoding="utf-8") as f:
            sacre, papers = scores(references, f.read().splitlines(), args.lang)
        print(f"{sacre:6.2f} {papers:6.2f}  {path}")


if __name__ == "__main__":
    main()
