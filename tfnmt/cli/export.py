"""tfnmt export: a TF-Serving-ready SavedModel (tokenizer and beam search inside), or a TFLite
flatbuffer for phones (--format=tflite)."""

from absl import logging

from tfnmt.cli import common
from tfnmt.cli.flags import FLAGS
from tfnmt.errors import ConfigError
from tfnmt.export import saved_model, tflite


def run():
    common.require("model_dir", "export_dir")
    common.check_output_dir(FLAGS.export_dir, "export_dir")
    config, translator = common.load_translator()
    name = FLAGS.export_name or config["model"]
    if FLAGS.format == "tflite":
        path = tflite.export(translator, FLAGS.model_dir, FLAGS.export_dir, name,
                             FLAGS.export_version, config, FLAGS.quantize)
    elif FLAGS.quantize != "none":
        raise ConfigError("--quantize applies to --format=tflite only")
    else:
        path = saved_model.export(translator, FLAGS.export_dir, name, FLAGS.export_version, config)
    if translator.model.autoregressive or FLAGS.format == "tflite":
        logging.info("exported %s (beam %d, length penalty %s)", path, FLAGS.beam_size,
                     FLAGS.length_penalty)
    else:
        logging.info("exported %s (serving_default: greedy%s)", path,
                     f"; beam: its beam search, width {FLAGS.beam_size}" if FLAGS.beam_size > 1 else "")
    print(path)
