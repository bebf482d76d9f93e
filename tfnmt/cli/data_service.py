"""tfnmt data-service: one server of a tf.data service that makes `train`'s batches on other
machines (docs/training.md, "Training batches from a tf.data service").

Without --data_service it starts the dispatcher on --data_service_port; with
--data_service=grpc://DISPATCHER:PORT it starts a worker that joins it, reachable by trainers at
--data_service_host:--data_service_port. It prints its address and serves until stopped (Ctrl-C
or SIGTERM). A worker runs the pipeline's SentencePiece ops, so it runs where tfnmt is
installed, with the corpus at the path `train` gives (--data=text:DIR) or the same TFDS data.
"""

import signal
import socket
import threading

from tfnmt.cli.flags import read
from tfnmt.data.options import DataServiceOptions
from tfnmt.errors import ConfigError

PROTOCOL = "grpc"


def start(options):
    """The server `options` (DataServiceOptions) describe, started: a DispatchServer or a
    WorkerServer; its `target` ("grpc://HOST:PORT") is where trainers or workers reach it."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the batches need)
    service = tf.data.experimental.service
    if not options.data_service:
        return service.DispatchServer(service.DispatcherConfig(port=options.data_service_port,
                                                               protocol=PROTOCOL))
    if not options.data_service.startswith(f"{PROTOCOL}://"):
        raise ConfigError(f"--data_service={options.data_service!r}: give the dispatcher as "
                          f"{PROTOCOL}://HOST:PORT")
    host = options.data_service_host or socket.getfqdn()
    return service.WorkerServer(service.WorkerConfig(
        dispatcher_address=options.data_service.split("://", 1)[1],
        worker_address=f"{host}:%port%", port=options.data_service_port, protocol=PROTOCOL))


def address(server, options):
    """"dispatcher at grpc://HOST:PORT" or "worker at ...": the port it bound (0 picks one)."""
    if not options.data_service:
        return f"dispatcher at {server.target}"
    port = server._address.rsplit(":", 1)[1]  # no public accessor for a worker's bound port
    return f"worker at {PROTOCOL}://{options.data_service_host or socket.getfqdn()}:{port}"


def run():
    options = read(DataServiceOptions)
    try:
        server = start(options)
    except Exception as e:  # a port in use, an unreachable dispatcher: TensorFlow's own words
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"cannot start the {'worker' if options.data_service else 'dispatcher'}: "
                          f"{str(e).splitlines()[0]}") from None
    print(f"tf.data service {address(server, options)}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
