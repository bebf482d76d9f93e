"""TensorFlow's C++ log lines, which it writes straight to file descriptor 2: which of them a
user should see (`native_line`), and a filter of fd 2 that holds only while a block runs
(`filtered`), for library calls, which must leave the caller's stderr as they found it.

TensorFlow 2.21 logs through absl C++ logging, which ignores TF_CPP_MIN_LOG_LEVEL before
absl::InitializeLog() (never called): `import tensorflow` prints its start-up lines (oneDNN, CUDA
stubs) - twice, because `_pywrap_profiler_plugin.so` carries a second copy of TensorFlow's
platform code and of absl - and later `E0000 ... failed call to cuInit` on a machine without a
GPU, a oneDNN line about DT_INT64 and, with op determinism, one about tf.data's
`use_unbounded_threadpool` attribute. The command line filters fd 2 for its whole run
(cli/console.py `filter_native_logs`).
"""

import contextlib
import os
import re
import sys
import threading

# absl's C++ format (before absl::InitializeLog() its time reads 00:00:<epoch seconds>), then
# TensorFlow's own format of earlier releases.
_RECORD = re.compile(
    rb"(?P<a>[IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^\s\]]+:\d+\] "
    rb"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<b>[IWEF]) [^\s\]]+:\d+\] ")
_NOISE_LINES = (b"WARNING: All log messages before absl::InitializeLog() is called",
                b"To enable the following instructions:",  # the CPU feature line's second line
                # LiteRT's interpreter, on its first use in a process (TFLite exports).
                b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.")
# Errors TensorFlow logs on every start of a CPU-only (or a GPU) build that are no error of ours.
_NOISE_ERRORS = (b"failed call to cuInit", b"oneDNN supports DT_", b"Unable to register cu",
                 b"computation placer already registered",
                 # --deterministic: op determinism makes tf.data rewrite a ParallelMapDatasetV2
                 # into a MapDataset, whose op definition lacks the attribute it carries over.
                 b"NodeDef mentions attribute use_unbounded_threadpool which is not in the op")


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


def write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def pass_on(read_fd, write_fd):
    """Copies `read_fd` to `write_fd` until its end, less what `native_line` drops."""
    pending = b""
    while True:
        try:
            chunk = os.read(read_fd, 1 << 16)
        except InterruptedError:
            continue
        if not chunk:
            break
        lines = (pending + chunk).split(b"\n")
        # A C++ record arrives whole with its newline (one write); a partial line is a progress
        # bar or a prompt, shown at once, unless it may still become a noise line: LiteRT
        # writes "INFO: ", its message and the newline one by one.
        pending = lines[-1] if lines[-1] and any(
            noise.startswith(lines[-1]) for noise in _NOISE_LINES) else b""
        out = b"".join(native_line(line + b"\n") for line in lines[:-1])
        if not pending:
            out += native_line(lines[-1])
        try:
            write_all(write_fd, out)
        except OSError:  # nobody reads stderr any more
            return
    try:
        write_all(write_fd, native_line(pending))
    except OSError:
        pass


_lock = threading.RLock()
_depth = 0


@contextlib.contextmanager
def filtered():
    """While the block runs, fd 2 goes through a thread that drops TensorFlow's C++ info lines
    and known noise; everything else, Python's own stderr included, passes unchanged and in
    order. Afterwards fd 2 is the caller's again. Nested blocks share the outer filter."""
    global _depth
    with _lock:
        _depth += 1
        outer = _depth > 1
    if outer:
        try:
            yield
        finally:
            with _lock:
                _depth -= 1
        return
    _flush()
    read_fd, write_fd = os.pipe()
    real_stderr = os.dup(2)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    thread = threading.Thread(target=_pass_on_and_close, args=(read_fd, os.dup(real_stderr)),
                              daemon=True, name="tfnmt-native-logs")
    thread.start()
    try:
        yield
    finally:
        _flush()
        os.dup2(real_stderr, 2)  # closes the pipe's last write end: the thread sees its end
        os.close(real_stderr)
        # A process started inside the block may hold the write end for longer: the thread then
        # stays to pass on what it writes, and the caller does not wait for it.
        thread.join(timeout=5)
        with _lock:
            _depth -= 1


def _pass_on_and_close(read_fd, write_fd):
    try:
        pass_on(read_fd, write_fd)
    finally:
        os.close(read_fd)
        os.close(write_fd)


def _flush():
    try:
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
