"""What a tfnmt command writes to stderr: its own progress and warnings, and nothing else unless
asked for with --verbosity=1.

Three sources of noise are kept out by default:
* TensorFlow's C++ log lines, written straight to file descriptor 2 (which ones:
  tfnmt/native_logs.py). `filter_native_logs` puts a small child process between fd 2 and the
  real stderr that drops them for the whole command (a child, not a thread: if the command
  dies, the child still passes on the last lines it was sent).
* Other libraries' Python INFO logs (TFDS prints several lines per dataset it opens), and
  TensorFlow's warnings about every value a failed checkpoint read left unrestored.
* Progress bars in files: a bar is drawn only when stderr is a terminal; elsewhere a line every
  tfnmt/progress.py EVERY seconds says how far the work is.
"""

import atexit
import os
import signal
import sys
import time

from tfnmt import native_logs

_stderr_is_terminal = None


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
            native_logs.pass_on(read_fd, real_stderr)
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


class _CurrentStderr:
    def write(self, text):
        return sys.stderr.write(text)

    def flush(self):
        sys.stderr.flush()

    def isatty(self):
        return sys.stderr.isatty()

    def close(self):
        """absl's handler closes its stream at exit; sys.stderr is not ours to close."""


_CURRENT_STDERR = _CurrentStderr()


def setup_logging(flag_values):
    """Python logging for one command, from absl's --verbosity (0 unless given)."""
    import logging as std_logging

    from absl import logging
    verbosity = flag_values.verbosity if flag_values["verbosity"].present else 0
    logging.use_absl_handler()
    logging.set_verbosity(verbosity)
    handler = logging.get_absl_handler()
    # Log to sys.stderr as it is at each record, not as it was at this call: in-process callers
    # (pytest's capture, the Python API after a CLI call) replace and close it in between.
    handler.python_handler.stream = _CURRENT_STDERR
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
