"""The `tfnmt` command: `tfnmt VERB [--flag=value ...] [--flagfile=FILE]`.

Problems the user can fix (bad flags, missing files, unknown models, unreadable checkpoints)
end the command with one line on stderr and exit status 2; there is no traceback.
"""

import importlib
import os
import sys

VERBS = {
    "vocab": "train the SentencePiece vocabulary",
    "train": "train or resume a model (builds the vocabulary if missing)",
    "evaluate": "sacreBLEU and chrF on the test split",
    "translate": "translate a file or stdin",
    "export": "export a SavedModel for TF Serving",
    "serve": "serve exported models over TF Serving's REST API",
    "average": "average the last or best checkpoints",
    "distill": "translate the training data with a teacher into a new text corpus",
    "info": "list models, or count a model's parameters",
    "bench": "measure training and translation speed",
}

USAGE = "usage: tfnmt VERB [--flags] [--flagfile=FILE]\n\nverbs:\n" + "".join(
    f"  {verb:<10}{text}\n" for verb, text in VERBS.items()) + "\n`tfnmt VERB --help` lists the flags."


def _quiet_tensorflow_internals(record):
    # TensorFlow logs every checkpoint shard at INFO; that drowns the training log.
    return "Sharding callback duration" not in record.getMessage()


def _fail(verb, message):
    print(f"tfnmt {verb}: error: {message}", file=sys.stderr)
    return 2


def main(argv=None):
    argv = list(sys.argv if argv is None else argv)
    if len(argv) < 2 or argv[1] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if len(argv) >= 2 else 2
    verb = argv[1]
    if verb not in VERBS:
        return _fail(verb, f"unknown command; choose one of {', '.join(VERBS)}")
    # TensorFlow's C++ start-up chatter hides the messages that matter.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from absl import flags, logging
    from tfnmt.cli.flags import FLAGS
    from tfnmt.errors import UserError

    rest = argv[2:]
    if "--help" in rest or "-h" in rest or "--helpfull" in rest:
        print(f"tfnmt {verb}: {VERBS[verb]}\n")
        print(FLAGS.get_help())
        return 0
    # Start from the defaults, so that in-process calls (tests, notebooks) never inherit flags.
    FLAGS.unparse_flags()
    try:
        FLAGS([argv[0]] + rest)
    except flags.Error as e:
        return _fail(verb, str(e).splitlines()[0])
    logging.use_absl_handler()
    logging.set_verbosity(logging.INFO)
    handler = logging.get_absl_handler()
    # Log to the stderr of this call (it differs between in-process calls, e.g. under pytest).
    handler.python_handler.stream = sys.stderr
    if _quiet_tensorflow_internals not in handler.filters:
        handler.addFilter(_quiet_tensorflow_internals)
    try:
        import keras
        # Global Keras state must not leak between in-process calls (tests, notebooks).
        keras.mixed_precision.set_global_policy("float32")
        module = importlib.import_module(f"tfnmt.cli.{verb}")
        module.run()
    except UserError as e:
        return _fail(verb, str(e))
    except KeyboardInterrupt:
        print(f"tfnmt {verb}: interrupted", file=sys.stderr)
        return 130
    return 0


def run():
    sys.exit(main())


if __name__ == "__main__":
    run()
