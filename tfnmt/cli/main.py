"""The `tfnmt` command: `tfnmt VERB [--flag=value ...] [--flagfile=FILE]`.

Problems the user can fix (bad flags, out-of-range values, flags the verb does not read, missing
files, unknown models, unreadable checkpoints) end the command with one line on stderr and exit
status 2; there is no traceback. Flags are checked before any model or data is loaded. Ctrl-C
ends any command with `tfnmt VERB: interrupted`, exit status 130 (128 + SIGINT), from the first
import on. A reader of stdout that goes away (`tfnmt translate ... | head -2`) ends the command
as SIGPIPE ends other unix tools: exit status 141 (128 + SIGPIPE), with no message.
"""

import importlib
import os
import sys

from tfnmt import runtime

BROKEN_PIPE = 141  # 128 + SIGPIPE, the status a shell reports for `cat big | head -1`'s cat

USAGE_TAIL = ("\n`tfnmt VERB --help` lists the flags that VERB reads; `tfnmt --version` prints "
              "tfnmt's version.")


def _usage():
    from tfnmt.cli.verbs import VERBS
    # The name column fits the longest name and two spaces, whatever names are added.
    width = max(map(len, VERBS)) + 2
    return ("usage: tfnmt VERB [--flags] [--flagfile=FILE]\n\nverbs:\n"
            + "".join(f"  {verb:<{width}}{spec.summary}\n" for verb, spec in VERBS.items())
            + USAGE_TAIL)


def _fail(verb, message):
    print(f"tfnmt {verb}: error: {message}", file=sys.stderr)
    return 2


def _unknown_verb(verb, verbs):
    # absl's own suggestions for a mistyped flag, so that verbs and flags are matched alike.
    from absl.flags._helpers import get_flag_suggestions
    close = get_flag_suggestions(verb, list(verbs))
    if close:
        return f"unknown command {verb!r}; did you mean {' or '.join(map(repr, close))}?"
    return f"unknown command {verb!r}; choose one of {', '.join(verbs)}"


def _flag_error(error):
    """absl's message as one line: 'flag --x=1: ...' -> '--x=1: ...'; its 'ERROR:: Unable to
    open flagfile: [Errno 2] ...' -> 'cannot open flagfile: ...'."""
    from absl import flags
    text = str(error).splitlines()[0]
    if isinstance(error, flags.CantOpenFlagFileError):
        if "Unable to open flagfile:" not in text:  # a nested one (cli/flags.py), said in full
            return "cannot open flagfile " + text
        return "cannot open flagfile: " + text.split("Unable to open flagfile:", 1)[-1].strip()
    return text[len("flag "):] if text.startswith("flag --") else text


def main(argv=None):
    argv = list(sys.argv if argv is None else argv)
    try:
        return _main(argv)
    except KeyboardInterrupt:
        # Also while TensorFlow and the model load, the first seconds of every command.
        print(f"tfnmt {argv[1] if len(argv) > 1 else ''}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Python ignores SIGPIPE, so a write to a closed pipe raises instead of ending the
        # process; nothing is wrong and there is nobody left to tell.
        return BROKEN_PIPE


def _main(argv):
    # Only the verb table, which does not load TensorFlow, is needed to print the usage.
    from tfnmt.cli.verbs import VERBS
    if len(argv) < 2 or argv[1] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if len(argv) >= 2 else 2
    if argv[1] in ("--version", "-V"):
        from tfnmt import __version__
        print(f"tfnmt {__version__}")
        return 0
    verb = argv[1]
    if verb not in VERBS:
        return _fail(verb, _unknown_verb(verb, VERBS))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    runtime.configure()  # in-process calls (tests) too, where TensorFlow has not allocated yet
    runtime.load_tensorflow()
    from absl import flags
    from tfnmt.cli import console, verbs
    from tfnmt.cli import flags as flag_defs
    from tfnmt.cli.flags import FLAGS
    from tfnmt.errors import UserError

    rest = argv[2:]
    help_flags = ("--help", "-h", "--helpfull")
    if any(arg in help_flags for arg in rest):
        # The other flags, when they parse, narrow the help (`train --model=X --help`).
        FLAGS.unparse_flags()
        try:
            FLAGS([argv[0]] + [arg for arg in rest if arg not in help_flags])
        except flags.Error:
            FLAGS.unparse_flags()
        print(verbs.help_text(verb, FLAGS))
        FLAGS.unparse_flags()
        return 0
    # Start from the defaults, so that in-process calls (tests, notebooks) never inherit flags.
    FLAGS.unparse_flags()
    flag_defs.FLAGFILES_READ.clear()
    try:
        positional = FLAGS([argv[0]] + rest)[1:]
    except flags.Error as e:
        return _fail(verb, _flag_error(e))
    if positional:
        return _fail(verb, f"unexpected argument {positional[0]!r}: give flags as --name=value "
                           f"(the input file of translate is --input=FILE)")
    unread = verbs.unread_flag(verb, rest, FLAGS)
    if unread:
        return _fail(verb, unread)
    console.setup_logging(FLAGS)
    try:
        import keras
        # Global Keras state must not leak between in-process calls (tests, notebooks).
        keras.mixed_precision.set_global_policy("float32")
        runtime.trace_as_written()
        if verb in runtime.DECODING_VERBS:
            runtime.one_thread_per_op()
        module = importlib.import_module(f"tfnmt.cli.{verb.replace('-', '_')}")
        module.run()
    except UserError as e:
        return _fail(verb, str(e))
    return 0


def run():
    # Before anything loads TensorFlow: its allocator reads the environment once.
    runtime.configure()
    # Unless the detail is asked for, TensorFlow's C++ log lines are filtered from here on:
    # they are written while TensorFlow loads, before any flag is parsed.
    if _verbosity_on_command_line(sys.argv[2:]) < 1:
        from tfnmt.cli import console
        console.filter_native_logs()
    code = main()
    try:
        sys.stdout.flush()  # what is still buffered, while a failure can still be caught
    except BrokenPipeError:
        code = BROKEN_PIPE
    if code == BROKEN_PIPE:
        # The interpreter flushes stdout again on exit and would print the error it meets.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(code)


def _verbosity_on_command_line(args):
    for arg in args:
        if arg.startswith("--verbosity="):
            try:
                return int(arg.split("=", 1)[1])
            except ValueError:
                return 0  # flag parsing reports it
    return 0


if __name__ == "__main__":
    run()
