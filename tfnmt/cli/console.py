"""What a tfnmt command writes to stderr: its own progress and warnings, and nothing else unless
asked for with --verbosity=1.

Three sources of noise are kept out by default:
* TensorFlow's C++ log lines. TensorFlow 2.21 logs through absl C++ logging, which ignores
  TF_CPP_MIN_LOG_LEVEL before absl::InitializeLog() (never called), so loading TensorFlow prints
  its start-up lines (oneDNN, CUDA stubs) - twice, because `_pywrap_profiler_plugin.so` carries
  a second copy of TensorFlow's platform code and of absl, whose static initialisers log again
  when `import tensorflow` loads it - and later `E0000 ... failed call to cuInit` on a machine
  without a GPU, a oneDNN line about DT_INT64 and, with --deterministic, one about tf.data's
  `use_unbounded_threadpool` attribute; LiteRT's INFO lines (its XNNPACK delegate, created
  by every TFLite translate). They are written straight to file descriptor
  2, so `filter_native_logs` puts a small child process between fd 2 and the real stderr that
  drops them (a child, not a thread: if the command dies, the child still passes on the last
  lines it was sent).
* Other libraries' Python INFO logs (TFDS prints several lines per dataset it opens), and
  TensorFlow's warnings about every value a failed checkpoint read left unrestored.
* Progress bars in files: a bar is drawn only when stderr is a terminal; elsewhere a line every
  tfnmt/progress.py EVERY seconds says how far the work is.
"""

import atexit
import os
import re
import signal
import sys
import time

# absl's C++ format (before absl::InitializeLog() its time reads 00:00:<epoch seconds>), then
# TensorFlow's own format of earlier releases.
_RECORD = re.compile(
    rb"(?P<a>[IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^\s\]]+:\d+\] "
    rb"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<b>[IWEF]) [^\s\]]+:\d+\] ")
# LiteRT's (TFLite's) own logger, `SEVERITY: message`, which a TFLite translate meets when it
# creates its interpreter ("Created TensorFlow Lite XNNPACK delegate for CPU."); its warnings
# and errors pass. It writes the severity and the message in two writes.
_LITERT_DETAIL = (b"INFO: ", b"VERBOSE: ")
_NOISE_LINES = (b"WARNING: All log messages before absl::InitializeLog() is called",
                b"To enable the following instructions:",  # the CPU feature line's second line
                *_LITERT_DETAIL)
# Errors TensorFlow logs on every start of a CPU-only (or a GPU) build that are no error of ours.
_NOISE_ERRORS = (b"failed call to cuInit", b"oneDNN supports DT_", b"Unable to register cu",
                 b"computation placer already registered",
                 # --deterministic: op determinism makes tf.data rewrite a ParallelMapDatasetV2
                 # into a MapDataset, whose op definition lacks the attribute it carries over.
                 b"NodeDef mentions attribute use_unbounded_threadpool which is not in the op")

_stderr_is_terminal = None


def native_line(line):
    """The part of one line (bytes) written to fd 2 that the user should see."""
    if line.startswith(_NOISE_LINES):
        return b""
    record = _RECORD.search(line)
    if record is None:
        return line
    severity = record.group("a") or record.group("b")
    if severity in (b"I", b"W") or any(noise in line for noise in _NOISE_ERRORS):
        # What precedes the record on its line stays: a progress bar, redrawn in place.
        return line[:record.start()]
    return line


def _write(fd, data):
    while data:
        data = data[os.write(fd, data):]


class NativeFilter:
    """What is written to fd 2, chunk by chunk, in; what the user should see out."""

    def __init__(self):
        self.held = b""

    def feed(self, chunk):
        lines = (self.held + chunk).split(b"\n")
        self.held = b""
        out = b"".join(native_line(line + b"\n") for line in lines[:-1])
        # A C++ record arrives whole with its newline (one write); another partial line is a
        # progress bar or a prompt, shown at once. Only LiteRT's severity waits for its message.
        if lines[-1].startswith(_LITERT_DETAIL):
            self.held = lines[-1]
            return out
        return out + native_line(lines[-1])

    def end(self):
        held, self.held = self.held, b""
        return native_line(held)


def _pass_on(read_fd, write_fd):
    native = NativeFilter()
    while True:
        try:
            chunk = os.read(read_fd, 1 << 16)
        except InterruptedError:
            continue
        out = native.feed(chunk) if chunk else native.end()
        try:
            _write(write_fd, out)
        except OSError:  # nobody reads stderr any more
            break
        if not chunk:
            break


def filter_native_logs():
    """From here on (call it before importing TensorFlow), fd 2 goes through a child process
    that drops TensorFlow's C++ info lines and known noise; everything else passes unchanged."""
    global _stderr_is_terminal
    _stderr_is_terminal = os.isatty(2)
    if not hasattr(os, "fork"):
        return
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    real_stderr = os.dup(2)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(write_fd)
            # Ctrl-C reaches the whole process group: the command reports it, so stay to pass
            # that on. Readers of stdout wait for its end: hold no copy of it.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)
            _pass_on(read_fd, real_stderr)
        finally:
            os._exit(0)
    os.close(read_fd)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    atexit.register(_stop_filter, pid, real_stderr)


def _stop_filter(pid, real_stderr):
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os.dup2(real_stderr, 2)  # closes the pipe: the child writes what is left and exits
    # Let it finish first, so that the shell prompt comes after the last line.
    for _ in range(100):
        if os.waitpid(pid, os.WNOHANG)[0]:
            return
        time.sleep(0.01)


def stderr_is_terminal():
    return os.isatty(2) if _stderr_is_terminal is None else _stderr_is_terminal


class _Detail:
    """absl handler filter: at verbosity 0, other libraries' INFO lines go, and warnings that
    are no news to the user: TensorFlow's about each value a failed checkpoint read left
    unrestored (tfnmt reports the failure in one line), TFDS's about the folder of a dataset it
    is about to prepare."""

    _NOT_NEWS = ("Value in checkpoint could not be found in the restored object",
                 "being deleted with unrestored values", "has no dataset_info.json")

    def __init__(self, verbosity):
        self.verbosity = verbosity
        self.package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def filter(self, record):
        if self.verbosity >= 1:
            return True
        if record.pathname.startswith(self.package):
            return True
        if record.levelno < 30:  # logging.WARNING
            return False
        return not any(text in record.getMessage() for text in self._NOT_NEWS)


class _Short:
    """`12:04:31 message` (and `warning: ` before a warning): the default format."""

    def format(self, record):
        level = {30: "warning: ", 40: "error: ", 50: "error: "}.get(record.levelno, "")
        return f"{time.strftime('%H:%M:%S', time.localtime(record.created))} {level}{record.getMessage()}"


def setup_logging(flag_values):
    """Python logging for one command, from absl's --verbosity (0 unless given)."""
    import logging as std_logging

    from absl import logging
    verbosity = flag_values.verbosity if flag_values["verbosity"].present else 0
    logging.use_absl_handler()
    logging.set_verbosity(verbosity)
    handler = logging.get_absl_handler()
    # Log to the stderr of this call (it differs between in-process calls, e.g. under pytest).
    handler.python_handler.stream = sys.stderr
    handler.python_handler.setFormatter(logging.PythonFormatter() if verbosity >= 1 else _Short())
    for old in [f for f in handler.filters if isinstance(f, _Detail)]:
        handler.removeFilter(old)
    handler.addFilter(_Detail(verbosity))
    # TensorFlow gives its logger a handler of its own when it is imported before absl's is
    # installed; with both, each of its warnings was printed twice.
    tf_logger = std_logging.getLogger("tensorflow")
    for extra in [h for h in tf_logger.handlers if type(h) is std_logging.StreamHandler]:
        tf_logger.removeHandler(extra)
    return verbosity


def progress_bar(total=None, unit="sent", desc=None, initial=0):
    """A tqdm bar on stderr where it is a terminal; elsewhere a log file would collect every
    redraw, so progress lines at a steady cadence (tfnmt/progress.py). Close it when done."""
    if not stderr_is_terminal():
        from tfnmt.progress import ProgressLines
        return ProgressLines(total=total, unit=unit, desc=desc or "", initial=initial)
    from tqdm import tqdm
    return tqdm(total=total, unit=unit, desc=desc, initial=initial, file=sys.stderr)
