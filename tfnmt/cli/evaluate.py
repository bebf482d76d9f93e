"""tfnmt evaluate: sacreBLEU and chrF of a checkpoint, an export or a served model on a test
split, translated by tfnmt.Translator (the Python API's) as `tfnmt translate` translates."""

import sys
import time

from absl import logging

from tfnmt.cli import common, console
from tfnmt.cli.flags import read, read_fields
from tfnmt.cli.options import TranslationOptions
from tfnmt.data import sources
from tfnmt.data.options import DataOptions
from tfnmt.evaluation import bleu, length_buckets
from tfnmt.errors import cannot_write
from tfnmt.evaluation.options import ScoringOptions
from tfnmt.training.options import TrainOptions


def run():
    data, scoring_options = read(DataOptions), read(ScoringOptions)
    t, bleu_tokenize = read(TranslationOptions), read_fields(TrainOptions, ("bleu_tokenize",))
    edges = (length_buckets.parse_edges(scoring_options.length_buckets)
             if scoring_options.length_buckets else None)
    if t.output and t.output != "-":
        common.check_output_file(t.output)
    config, translator = common.open_translator(common.translator_source())
    spec = common.data_spec(data, config)
    scoring = dict(lowercase=scoring_options.lowercase, target_lang=spec.target_lang,
                   tokenize=bleu_tokenize["bleu_tokenize"])
    bleu.metric(**scoring)
    split = common.splits(data, spec)[2]
    source_sentences, references = sources.references(spec, split, data.test_limit)
    start = time.time()
    bar = console.progress_bar(total=len(source_sentences), desc="evaluate")
    try:
        hypotheses = [""] * len(source_sentences)
        for index, translation in translator.translations(
                source_sentences, n_best=1, alignments=False, batch_size=t.decode_batch_size,
                progress=bar, where=f"{spec.source} {split}"):
            hypotheses[index] = translation.text
    finally:
        bar.close()
    elapsed = time.time() - start
    if t.output and t.output != "-":
        try:
            with open(t.output, "w", encoding="utf-8") as f:
                f.write("\n".join(hypotheses) + "\n")
        except OSError as e:
            raise cannot_write(t.output, e, "free some space or choose another --output") from None
    result = bleu.score(hypotheses, references, **scoring)
    logging.info("translated %d sentences in %.1fs", len(hypotheses), elapsed)
    _print(spec, split, result)
    if edges:
        buckets, longer = length_buckets.bucket_scores(source_sentences, hypotheses, references,
                                                       edges, **scoring)
        print(length_buckets.format_table("BLEU by source length:", buckets))
        print(length_buckets.format_table("BLEU on sources longer than:", longer))
        result["length_buckets"], result["longer_than"] = buckets, longer
    sys.stdout.flush()
    return result


def _print(spec, split, result):
    print(f"{spec.source} {spec.source_lang}-{spec.target_lang} {split}: "
          f"BLEU {result['bleu']:.2f}  chrF {result['chrf']:.2f}")
    print(f"  {result['bleu_detail']}")
    print(f"  BLEU {result['bleu_moses_lc']:.2f} as Multi30k papers report it ({bleu.MOSES_LC_SIGNATURE}; "
          "not comparable with sacreBLEU's)")
    print(f"  BLEU signature: {result['bleu_signature']}")
    print(f"  chrF signature: {result['chrf_signature']}")
