"""tfnmt evaluate: sacreBLEU and chrF of a checkpoint or an exported model on a test split."""

import sys
import time

from absl import logging

from tfnmt.cli import common, console
from tfnmt.cli.flags import FLAGS
from tfnmt.data import sources
from tfnmt.evaluation import bleu, length_buckets
from tfnmt.decoding.translator import translate_sentences
from tfnmt.errors import cannot_write


def run():
    edges = length_buckets.parse_edges(FLAGS.length_buckets) if FLAGS.length_buckets else None
    if FLAGS.output and FLAGS.output != "-":
        common.check_output_file(FLAGS.output)
    config, translator = common.translator_from_flags()
    spec = common.data_spec(config)
    scoring = dict(lowercase=FLAGS.lowercase, target_lang=spec.target_lang,
                   tokenize=FLAGS.bleu_tokenize)
    bleu.metric(**scoring)
    split = common.splits(spec)[2]
    source_sentences, references = sources.references(spec, split, FLAGS.test_limit)
    translator.prepare(source_sentences, f"{spec.source} {split}")
    start = time.time()
    hypotheses = translate_sentences(translator, source_sentences, FLAGS.decode_batch_size,
                                     progress=console.stderr_is_terminal())
    elapsed = time.time() - start
    if FLAGS.output and FLAGS.output != "-":
        try:
            with open(FLAGS.output, "w", encoding="utf-8") as f:
                f.write("\n".join(hypotheses) + "\n")
        except OSError as e:
            raise cannot_write(FLAGS.output, e, "free some space or choose another --output") from None
    result = bleu.score(hypotheses, references, **scoring)
    logging.info("translated %d sentences in %.1fs", len(hypotheses), elapsed)
    print(f"{spec.source} {spec.source_lang}-{spec.target_lang} {split}: "
          f"BLEU {result['bleu']:.2f}  chrF {result['chrf']:.2f}")
    print(f"  {result['bleu_detail']}")
    print(f"  BLEU signature: {result['bleu_signature']}")
    print(f"  chrF signature: {result['chrf_signature']}")
    if edges:
        buckets, longer = length_buckets.bucket_scores(source_sentences, hypotheses, references,
                                                       edges, **scoring)
        print(length_buckets.format_table("BLEU by source length:", buckets))
        print(length_buckets.format_table("BLEU on sources longer than:", longer))
        result["length_buckets"], result["longer_than"] = buckets, longer
    sys.stdout.flush()
    return result
