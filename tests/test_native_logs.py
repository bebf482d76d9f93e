"""tfnmt/native_logs.py: which of TensorFlow's (and LiteRT's) lines on fd 2 are dropped, also
when they arrive in pieces, and the filter of fd 2 that holds only while a block runs. (The
line classification itself: tests/cli/test_cli.py.)"""

import os
import threading

from tfnmt import native_logs

RECORD = b"I0000 00:00:1795698308.682714   31547 port.cc:153] oneDNN custom operations are on.\n"


def _passed_on(*writes):
    """What `pass_on` writes on, given `writes` one by one to its input."""
    source_read, source_write = os.pipe()
    sink_read, sink_write = os.pipe()
    thread = threading.Thread(target=native_logs.pass_on, args=(source_read, sink_write))
    thread.start()
    for data in writes:
        os.write(source_write, data)
    os.close(source_write)
    thread.join()
    os.close(source_read)
    os.close(sink_write)
    out = b""
    while chunk := os.read(sink_read, 1 << 16):
        out += chunk
    os.close(sink_read)
    return out


def test_a_noise_line_written_in_pieces_is_dropped_and_other_pieces_pass():
    # LiteRT writes its severity, its message and the newline one at a time.
    assert _passed_on(b"INFO: ", b"Created TensorFlow Lite XNNPACK delegate for CPU.", b"\n",
                      b"mine\n") == b"mine\n"
    assert _passed_on(b"INFO: ", b"something else", b"\n") == b"INFO: something else\n"
    assert _passed_on(b"\r 40%|####  | 2/5", RECORD, b"\r 60%|######| 3/5\n") == \
        b"\r 40%|####  | 2/5\r 60%|######| 3/5\n"
    assert _passed_on(b"INFO: ") == b"INFO: "  # held back, then passed on at the end


def test_fd_2_is_filtered_only_inside_the_block(capfd):
    os.write(2, b"before\n")
    with native_logs.filtered():
        os.write(2, RECORD + b"kept\n")
        with native_logs.filtered():  # nested: the same filter
            os.write(2, RECORD + b"nested\n")
        os.write(2, b"E0000 00:00:1.5  7 kernel.cc:52] OOM when allocating tensor\n")
    os.write(2, RECORD)
    assert capfd.readouterr().err == ("before\nkept\nnested\n"
                                      "E0000 00:00:1.5  7 kernel.cc:52] OOM when allocating "
                                      "tensor\n" + RECORD.decode())


def test_the_callers_fd_2_is_restored_when_the_block_raises(capfd):
    target = os.readlink("/proc/self/fd/2") if os.path.exists("/proc/self/fd/2") else None
    try:
        with native_logs.filtered():
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    if target is not None:
        assert os.readlink("/proc/self/fd/2") == target
    os.write(2, RECORD)
    assert capfd.readouterr().err == RECORD.decode()
