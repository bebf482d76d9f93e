"""tfnmt export: a TF-Serving-ready SavedModel (tokenizer and beam search inside), a TFLite
flatbuffer for phones (--format=tflite), or a CTranslate2 model (--format=ctranslate2)."""

from absl import logging

from tfnmt.cli import common
from tfnmt.cli.flags import FLAGS
from tfnmt import model_dir as model_dir_lib
from tfnmt.data.vocab import load_vocabs
from tfnmt.errors import ConfigError
from tfnmt.exporters import ctranslate2, saved_model, tflite


def run():
    common.require("model_dir", "export_dir")
    common.check_output_dir(FLAGS.export_dir, "export_dir")
    if FLAGS.format == "tflite" and FLAGS.n_best > 1:
        raise ConfigError("--n_best applies to SavedModel exports: a TFLite flatbuffer returns "
                          "one translation")
    if FLAGS.format == "tflite" and FLAGS.alignments != "none":
        raise ConfigError("--alignments applies to SavedModel exports: a TFLite flatbuffer "
                          "returns translations only")
    if FLAGS.format == "ctranslate2":
        return _ctranslate2()
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


def _ctranslate2():
    # CTranslate2 takes its decoding settings per call, so only the model is converted.
    for flag in ("n_best", "alignments", "quantize"):
        if FLAGS[flag].value != FLAGS[flag].default:
            raise ConfigError(f"--{flag} does not apply to --format=ctranslate2: CTranslate2 "
                              "chooses it when it translates (README: CTranslate2)")
    ctranslate2.check_model(model_dir_lib.read_config(FLAGS.model_dir)["model"])
    config, translator = common.load_translator()
    path = ctranslate2.export(translator.model, *load_vocabs(FLAGS.model_dir), translator.options,
                              FLAGS.export_dir, FLAGS.export_name or config["model"],
                              FLAGS.export_version)
    logging.info("exported %s (CTranslate2)", path)
    print(path)
