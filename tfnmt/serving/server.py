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

    from tfnmt.serving.tf_json import error_body
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
            self.response_headers.extend([("Content-Type", "application/json"),
                                          ("X-Content-Type-Options", "nosniff")])
            self.set_close_on_finish()
            self.content_length = len(body)
            self.write(body)

    class JsonErrorChannel(HTTPChannel):
        error_task_class = JsonErrorTask

    return JsonErrorChannel


def _idle(channel):
    """A connection with no request being read, queued or answered, and nothing left to send."""
    return not (channel.will_close or channel.close_when_flushed or channel.requests
                or channel.request is not None or channel.total_outbufs_len)


def _make_room(listener):
    """`listener.readable`, waitress's test of whether to accept a connection, but at the
    connection limit it closes the longest-idle connections instead of accepting nothing until
    one times out: otherwise a client that opens connections and sends nothing holds every slot
    (waitress leaves a new connection in the listen backlog, unanswered, for up to the idle
    timeout)."""
    import time

    from waitress.channel import HTTPChannel

    adj = listener.adj

    def readable():
        now = time.time()
        if now >= listener.next_channel_cleanup:
            listener.next_channel_cleanup = now + adj.cleanup_interval
            listener.maintenance(now)
        if not listener.accepting:
            return False
        # Connections only: waitress counts the listening sockets and its wake-up pipe as well,
        # so that a limit of 2 or less never accepts anything.
        channels = [c for c in list(listener._map.values()) if isinstance(c, HTTPChannel)]
        excess = len(channels) - adj.connection_limit + 1
        if excess <= 0:
            return True
        excess -= sum(1 for c in channels if c.will_close)
        # Closed by the loop's next pass over the sockets (as waitress's maintenance closes
        # timed-out ones), which then accepts: closing here would hand the loop closed sockets.
        for channel in sorted(filter(_idle, channels), key=lambda c: c.last_activity)[:max(excess, 0)]:
            channel.will_close = True
        logging.log_every_n_seconds(
            logging.WARNING, "%d connections open (--rest_api_max_connections): closing the "
            "longest-idle ones to take new ones", 60, len(channels))
        return False

    listener.readable = readable


def create(app, serve):
    """A waitress server for `app` as `serve` (ServeOptions) asks: bound to its REST host and port
    (port 0: any free port, see `server.effective_port`), its threads and limits."""
    from waitress.server import BaseWSGIServer, create_server
    max_request_bytes = serve.max_request_bytes
    # Bodies over our limit get their 413 from the application once waitress has read them, on
    # a connection that stays open; waitress's own limit, past which it stops reading and
    # closes the connection, is only a backstop against bodies far larger than that.
    # poll(), not select(), which fails on a descriptor past 1023, i.e. past about 1000
    # connections. Idle connections are looked for every second, so a timed-out one lives at
    # most a second longer.
    server = create_server(app, host=serve.rest_api_host, port=serve.rest_api_port,
                           threads=serve.rest_api_num_threads, ident="tfnmt-serve",
                           max_request_body_size=4 * max_request_bytes + (1 << 16),
                           expose_tracebacks=False, connection_limit=serve.rest_api_max_connections,
                           channel_timeout=serve.rest_api_idle_timeout_seconds, cleanup_interval=1,
                           asyncore_use_poll=True)
    # A host name with several addresses (localhost: 127.0.0.1 and ::1) gives one listener each.
    listeners = ([server] if isinstance(server, BaseWSGIServer) else
                 [s for s in server.map.values() if isinstance(s, BaseWSGIServer)])
    for listener in listeners:
        listener.channel_class = _json_error_channel(max_request_bytes)
        _make_room(listener)
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


def shutdown(server):
    """Stops a server of `create` that runs in another thread of this process: its worker
    threads finish, then every listener and connection closes and its loop ends (what waitress
    does when the loop ends on SystemExit, which only the loop's own thread can raise)."""
    from waitress import wasyncore
    server.task_dispatcher.shutdown()
    # One listener: the server is the dispatcher (map `_map`); several: `map` holds them all.
    wasyncore.close_all(getattr(server, "map", None) or server._map)


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
