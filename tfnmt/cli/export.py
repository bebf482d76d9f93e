"""tfnmt export: a TF-Serving-ready SavedModel (tokenizer and beam search inside), a TFLite
flatbuffer for phones (--format=tflite), or a CTranslate2 model (--format=ctranslate2)."""

import dataclasses
import os

from absl import logging

from tfnmt import model_dir as model_dir_lib, runtime
from tfnmt.cli import common
from tfnmt.cli.flags import read
from tfnmt.cli.options import ModelDirOptions
from tfnmt.data.vocab import load_vocabs
from tfnmt.decoding.options import DecodingOptions
from tfnmt.errors import ConfigError
from tfnmt.exporters import ctranslate2, saved_model, tflite
from tfnmt.exporters.options import ExportOptions


def check(export, decoding):
    """The settings across ExportOptions and DecodingOptions (those within ExportOptions are
    its own, ExportOptions.__post_init__)."""
    if export.format == "tflite" and decoding.n_best > 1:
        raise ConfigError("--n_best applies to SavedModel exports: a TFLite flatbuffer returns "
                          "one translation")
    if export.format == "tflite" and decoding.alignments != "none":
        raise ConfigError("--alignments applies to SavedModel exports: a TFLite flatbuffer "
                          "returns translations only")
    if export.format == "tflite" and decoding.xla_decoding:
        raise ConfigError("--xla_decoding applies to SavedModel exports: TFLite runs its own "
                          "kernels (docs/export.md)")
    if export.format == "tflite" and decoding.decode_dtype != "float32":
        raise ConfigError(f"--decode_dtype={decoding.decode_dtype} applies to SavedModel "
                          "exports: a TFLite flatbuffer's weights are chosen by --quantize")
    if export.format == "ctranslate2":
        # CTranslate2 takes its decoding settings per call, so only the model is converted.
        default = DecodingOptions()
        for name in ("n_best", "alignments", "xla_decoding", "decode_dtype"):
            if getattr(decoding, name) != getattr(default, name):
                raise ConfigError(f"--{name} does not apply to --format=ctranslate2: CTranslate2 "
                                  "chooses it when it translates (README: CTranslate2)")


def run():
    where, export = read(ModelDirOptions), read(ExportOptions)
    common.require(model_dir=where.model_dir, export_dir=export.export_dir)
    common.check_output_dir(export.export_dir, "export_dir")
    decoding = read(DecodingOptions)
    if export.format != "saved_model" and decoding.decode_dtype == runtime.AUTO:
        # A flatbuffer's weights are chosen by --quantize, CTranslate2's by its compute type.
        decoding = dataclasses.replace(decoding, decode_dtype="float32")
    check(export, decoding)
    if export.format != "saved_model" and common.is_ensemble(where):
        raise ConfigError(f"--format={export.format}: not for an ensemble (several --model_dir "
                          "or --checkpoint); its one export is a SavedModel")
    if export.format == "ctranslate2":
        return _ctranslate2(where, export, decoding)
    config, translator = common.load_translator(where, decoding)
    name = export.export_name or config["model"]
    if export.format == "tflite":
        path = tflite.export(translator, where.model_dir, export.export_dir, name,
                             export.export_version, config, export.quantize)
    else:
        path = saved_model.export(translator, export.export_dir, name, export.export_version,
                                  config, score=export.score, prefix=export.prefix)
    served = ({"model": translator.searcher} if export.format == "tflite"
              else translator.searcher.variants())
    logging.info("exported %s (%s; length penalty %s)", path, ", ".join(
        f"{name}: {type(s).__name__} width {s.width}" for name, s in served.items()),
        decoding.length_penalty)
    if export.format == "saved_model":
        logging.info("to serve it with TF Serving (one thread per op: for up to %d cores): %s",
                     runtime.SMALL_MACHINE_CORES,
                     tf_serving_command(path, name, translator.options.xla_decoding))
    print(path)


def tf_serving_command(path, name, xla):
    """The `docker run` line serving the export at `path` (BASE/NAME/VERSION) as `tfnmt serve`
    runs it (export/tf_serving/README.md): the BFC allocator, one thread per op, and XLA for an
    export compiled with it."""
    import tensorflow as tf
    return " ".join([
        f"docker run --rm -p 8501:8501 -v {os.path.dirname(os.path.abspath(path))}:/models/{name}",
        f"-e MODEL_NAME={name} -e TF_CPU_ALLOCATOR_USE_BFC=true",
        f"tensorflow/serving:{tf.__version__.split('-')[0]} --tensorflow_intra_op_parallelism=1",
        *(["--xla_cpu_compilation_enabled=true"] if xla else [])])


def _ctranslate2(where, export, decoding):
    ctranslate2.check_model(model_dir_lib.read_config(where.model_dir)["model"])
    config, translator = common.load_translator(where, decoding)
    path = ctranslate2.export(translator.model, *load_vocabs(where.model_dir), translator.options,
                              export.export_dir, export.export_name or config["model"],
                              export.export_version)
    logging.info("exported %s (CTranslate2)", path)
    print(path)
