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
    if FLAGS.format == "tflite" and FLAGS.n_best > 1:
        raise ConfigError("--n_best applies to SavedModel exports: a TFLite flatbuffer returns "
                          "one translation")
    if FLAGS.format == "tflite" and FLAGS.alignments != "none":
        raise ConfigError("--alignments applies to SavedModel exports: a TFLite flatbuffer "
                          "returns translations only")
    config, translator = common.load_translator()
    name = FLAGS.export_name or config["model"]
    if FLAGS.format == "tflite":
        path = tflite.export(translator, FLAGS.model_dir, FLAGS.export_dir, name,
                             FLAGS.export_version, config, FLAGS.quantize)
    elif FLAGS.quantize != "none":
        raise ConfigError("--quantize applies to --format=tflite only")
    else:
        path = saved_model.export(translator, FLAGS.export_dir, name, FLAGS.export_version, config)
    served = ({"model": translator.strategy} if FLAGS.format == "tflite"
              else translator.strategy.variants())
    logging.info("exported %s (%s; length penalty %s)", path, ", ".join(
        f"{name}: {type(s).__name__} width {s.width}" for name, s in served.items()),
        FLAGS.length_penalty)
    print(path)
