"""tfnmt export: write a TF-Serving-ready SavedModel (tokenizer and beam search inside)."""

from absl import logging

from tfnmt.cli import common
from tfnmt.cli.flags import FLAGS
from tfnmt.export import saved_model


def run():
    common.require("model_dir", "export_dir")
    config, translator = common.load_translator()
    name = FLAGS.export_name or config["model"]
    path = saved_model.export(translator, FLAGS.export_dir, name, FLAGS.export_version, config)
    logging.info("exported %s (beam %d, length penalty %s)", path, FLAGS.beam_size, FLAGS.length_penalty)
    print(path)
