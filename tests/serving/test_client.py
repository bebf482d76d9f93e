"""The `--server` client (serving/client.py) against a stand-in server or none: it retries a
bounded number of times, says so once, and keeps what it translated before the server went
away."""

import json
import os
import threading
import time

import pytest

from conftest import REPO, run_cli
from tfnmt.serving.client import ServerError, ServingClient


class StandInServer:
    """TF Serving's :predict for `tfnmt translate --server`: translates by upper-casing. From
    `port` (0: any free one), until it has answered `answers` requests, then it stops listening."""

    def __init__(self, port=0, answers=None):
        from wsgiref.simple_server import WSGIRequestHandler, make_server

        class Quiet(WSGIRequestHandler):
            def log_message(self, *args):
                pass
        self.answers, self.requests = answers, []
        self.httpd = make_server("127.0.0.1", port, self._app, handler_class=Quiet)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def _app(self, environ, start_response):
        texts = json.loads(environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"])))["inputs"]
        self.requests.append(texts)
        body = json.dumps({"outputs": {"translations": [t.upper() for t in texts],
                                       "scores": [0.0] * len(texts)}}).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        if self.answers is not None and len(self.requests) >= self.answers:
            threading.Thread(target=self.stop).start()
        return [body]

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_translate_says_once_that_it_retries_while_the_server_is_unreachable(tmp_path, capsys):
    lines = ["a cat", "the old man runs", "big house"]
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\n".join(lines) + "\n")
    with socket_closed_port() as port:
        # Nothing listens for the first 1.2 s: attempts at 0, 0.5 and 1.5 s (back-off 0.5, 1 s).
        started = []
        timer = threading.Timer(1.2, lambda: started.append(StandInServer(port)))
        timer.start()
        try:
            assert run_cli("translate", f"--server=http://127.0.0.1:{port}", "--served_model=tiny",
                           f"--input={source}", f"--output={output}") == 0
        finally:
            timer.join()
            for stand_in in started:
                stand_in.stop()
    assert output.read_text() == "".join(line.upper() + "\n" for line in lines)
    retrying = [line for line in capsys.readouterr().err.splitlines() if "retrying" in line]
    assert len(retrying) == 1, retrying
    assert f"http://127.0.0.1:{port}" in retrying[0] and "--server_retries" in retrying[0]


def test_translate_keeps_what_the_server_translated_before_it_went_away(tmp_path, capsys):
    # Lines in order of length, so the length-sorted batches follow the file.
    lines = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff"]
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\n".join(lines) + "\n")
    stand_in = StandInServer(answers=2)
    assert run_cli("translate", f"--server={stand_in.url}", "--served_model=tiny", f"--input={source}",
                   f"--output={output}", "--decode_batch_size=2", "--server_retries=1") == 2
    assert stand_in.requests == [["a", "bb"], ["ccc", "dddd"]]
    assert output.read_text() == "A\nBB\nCCC\nDDDD\n"
    err = capsys.readouterr().err
    assert "cannot connect" in err and f"{output} holds the first 4 of 6 translations" in err, err
    assert sum("retrying" in line for line in err.splitlines()) == 1


def test_client_retries_connection_errors_a_bounded_number_of_times(capsys):
    with socket_closed_port() as port:
        client = ServingClient(f"http://127.0.0.1:{port}", "tiny", retries=2, backoff=0.05)
        start = time.time()
        with pytest.raises(ServerError, match="cannot connect .* after 2 retries"):
            client.predict(["a"])
        assert time.time() - start >= 0.05 + 0.1
        assert run_cli("translate", f"--server=http://127.0.0.1:{port}", "--served_model=tiny",
                       "--server_retries=0", f"--input={os.path.join(REPO, 'setup.py')}") == 2
    assert "cannot connect" in capsys.readouterr().err


class socket_closed_port:
    """A loopback port nothing listens on."""

    def __enter__(self):
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        return self.port

    def __exit__(self, *exc):
        return False
