"""tfnmt serve: serve exported SavedModels over TF Serving's REST API, on this machine.

    tfnmt serve --export_dir=DIR                    every model DIR/NAME/ (newest version each)
    tfnmt serve --model_config_file=models.config   the models of a TF Serving model config

New versions (and, with --export_dir, new models) are picked up while serving. Production
deployments use TF Serving itself (export/tf_serving/README.md); this server is for machines
without Docker, for development and for tests.
"""

import sys

from absl import logging

from tfnmt.cli.flags import FLAGS
from tfnmt.errors import ConfigError
from tfnmt.serving import config as config_lib
from tfnmt.serving import server as server_lib
from tfnmt.serving.models import ModelManager
from tfnmt.serving.rest import RestApi


def batching_options():
    """The batching parameters, or None with --enable_batching=false."""
    if not FLAGS.enable_batching:
        return None
    options = {name: FLAGS[name].value for name in config_lib.BATCHING_FIELDS}
    if FLAGS.batching_parameters_file:
        options.update(config_lib.read_batching_parameters(FLAGS.batching_parameters_file))
    for name, value in options.items():
        if value < (0 if name == "batch_timeout_micros" else 1):
            raise ConfigError(f"--{name} must be positive, not {value}")
    return options


def run():
    if bool(FLAGS.export_dir) == bool(FLAGS.model_config_file):
        raise ConfigError("give --export_dir (serve every model under it) or --model_config_file "
                          "(a TF Serving models.config), not both")
    batching = batching_options()
    if FLAGS.model_config_file:
        manager = ModelManager(config_lib.read_model_config(FLAGS.model_config_file), batching=batching)
    else:
        manager = ModelManager(export_dir=FLAGS.export_dir, batching=batching)
    manager.start(FLAGS.file_system_poll_wait_seconds)
    app = RestApi(manager, max_request_bytes=FLAGS.max_request_bytes,
                  max_sentences=FLAGS.max_sentences_per_request,
                  max_sentence_chars=FLAGS.max_sentence_chars,
                  timeout_seconds=FLAGS.rest_api_timeout_in_ms / 1000, demo=not FLAGS.no_demo)
    try:
        server = server_lib.create(app, FLAGS.rest_api_host, FLAGS.rest_api_port,
                                   FLAGS.rest_api_num_threads, FLAGS.max_request_bytes)
    except OSError as e:
        manager.close()
        raise ConfigError(f"cannot listen on {FLAGS.rest_api_host}:{FLAGS.rest_api_port}: "
                          f"{e.strerror}") from None
    url = f"http://{FLAGS.rest_api_host}:{server.effective_port}"
    logging.info("batching: %s", batching or "off")
    # One line on stdout that scripts (and the tests) wait for.
    print(f"tfnmt serve: {', '.join(manager.names())} at {url}/v1/models/", flush=True)
    if not FLAGS.no_demo:
        logging.info("demo page: %s/", url)
    sys.stdout.flush()
    server_lib.run_until_stopped(server, on_stop=[manager.close])
