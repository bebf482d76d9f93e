"""The HTTP server of `tfnmt serve`: waitress, a production WSGI server in pure Python.

Why waitress: it accepts connections on one thread and runs requests on a fixed pool of worker
threads (--rest_api_num_threads), which bounds the concurrency the process takes on; it
buffers each request completely (up to a size limit) before the application sees it, so a slow
client ties up no worker thread; it speaks HTTP/1.1 with keep-alive and chunked bodies, and it
has no compiled parts. A thread pool (not worker processes) is what server-side batching needs:
the requests of all clients must reach the same batcher, and one process holds each model once.
"""

import signal

from absl import logging


def _json_error_channel(max_request_bytes):
    """waitress's connection class, answering the errors waitress finds itself (a body far over
    the limit, a malformed HTTP request) as the REST API answers every error: JSON {"error"}."""
    from waitress.channel import HTTPChannel
    from waitress.task import ErrorTask
    from waitress.utilities import RequestEntityTooLarge

    from tfnmt.serving.rest import error_body
    from tfnmt.serving.status import request_too_large

    class JsonErrorTask(ErrorTask):
        def execute(self):
            error = self.request.error
            if isinstance(error, RequestEntityTooLarge):
                message = request_too_large(self.request.content_length, max_request_bytes).message
            else:
                message = f"{error.reason}: {error.body}"
            body = error_body(message).encode("utf-8")
            self.status = f"{error.code} {error.reason}"
            self.response_headers.append(("Content-Type", "application/json"))
            self.set_close_on_finish()
            self.content_length = len(body)
            self.write(body)

    class JsonErrorChannel(HTTPChannel):
        error_task_class = JsonErrorTask

    return JsonErrorChannel


def create(app, host, port, threads, max_request_bytes):
    """A waitress server bound to host:port (port 0: any free port, see `server.effective_port`)."""
    from waitress.server import create_server
    # Bodies over our limit get their 413 from the application once waitress has read them, on
    # a connection that stays open; waitress's own limit, past which it stops reading and
    # closes the connection, is only a backstop against bodies far larger than that.
    server = create_server(app, host=host, port=port, threads=threads, ident="tfnmt-serve",
                           max_request_body_size=4 * max_request_bytes + (1 << 16),
                           expose_tracebacks=False, channel_timeout=120)
    server.channel_class = _json_error_channel(max_request_bytes)
    return server


def run_until_stopped(server, on_stop=()):
    """Serves until SIGTERM or SIGINT, then lets the running requests finish and runs `on_stop`."""
    def stop(signum, frame):
        logging.info("signal %d: stopping", signum)
        # waitress ends its loop on SystemExit and shuts its worker threads down.
        raise SystemExit(0)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.close()
        for callback in on_stop:
            callback()


def spawn(flags, timeout=300.0, env=None, log_path=None):
    """Starts `python -m tfnmt serve FLAGS` in a child process; returns (process, base URL) once
    it serves. Its log goes to `log_path` (or is dropped). For benchmarks and tests."""
    import os
    import subprocess
    import sys
    import time

    from tfnmt.errors import ConfigError
    log = open(log_path or os.devnull, "w")
    process = subprocess.Popen([sys.executable, "-m", "tfnmt", "serve", *flags],
                               stdout=subprocess.PIPE, stderr=log, text=True,
                               env=dict(env or os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    log.close()
    deadline = time.time() + timeout
    while True:
        line = process.stdout.readline()
        if line.startswith("tfnmt serve: ") and " at http" in line:
            return process, line.rsplit(" at ", 1)[1].strip().split("/v1/")[0]
        if not line or time.time() > deadline:
            process.kill()
            process.wait()
            tail = ""
            if log_path:
                with open(log_path) as f:
                    tail = f.read()[-2000:]
            raise ConfigError(f"tfnmt serve did not start: {tail}")


def stop(process, timeout=30.0):
    """Stops a spawned server (SIGTERM, then SIGKILL)."""
    import subprocess
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout:
        process.stdout.close()
