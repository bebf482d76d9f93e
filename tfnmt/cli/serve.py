"""tfnmt serve: serve exported SavedModels over TF Serving's REST API, on this machine.

    tfnmt serve --export_dir=DIR                    every model DIR/NAME/ (newest version each)
    tfnmt serve --model_config_file=models.config   the models of a TF Serving model config

New versions (and, with --export_dir, new models) are picked up while serving. Production
deployments use TF Serving itself (export/tf_serving/README.md); this server is for machines
without Docker, for development and for tests.
"""

import dataclasses
import sys

from absl import logging

from tfnmt.cli.flags import read, read_fields
from tfnmt.errors import ConfigError
from tfnmt.exporters.options import ExportOptions
from tfnmt.serving import config as config_lib
from tfnmt.serving import server as server_lib
from tfnmt.serving.models import ModelManager
from tfnmt.serving.options import BatchingOptions, ServeOptions
from tfnmt.serving.rest import RestApi


def batching_options(serve):
    """The batching parameters (the flags', overridden by a --batching_parameters_file), or None
    with --enable_batching=false."""
    if not serve.enable_batching:
        return None
    batching = read(BatchingOptions)
    if serve.batching_parameters_file:
        batching = dataclasses.replace(
            batching, **config_lib.read_batching_parameters(serve.batching_parameters_file))
    return batching


def run():
    serve = read(ServeOptions)
    export_dir = read_fields(ExportOptions, ("export_dir",))["export_dir"]
    if bool(export_dir) == bool(serve.model_config_file):
        raise ConfigError("give --export_dir (serve every model under it) or --model_config_file "
                          "(a TF Serving models.config), not both")
    batching = batching_options(serve)
    if serve.model_config_file:
        manager = ModelManager(config_lib.read_model_config(serve.model_config_file),
                               batching=batching)
    else:
        manager = ModelManager(export_dir=export_dir, batching=batching)
    manager.start(serve.file_system_poll_wait_seconds)
    app = RestApi(manager, serve)
    try:
        server = server_lib.create(app, serve)
    except OSError as e:
        manager.close()
        raise ConfigError(f"cannot listen on {serve.rest_api_host}:{serve.rest_api_port}: "
                          f"{e.strerror}") from None
    url = f"http://{serve.rest_api_host}:{server.effective_port}"
    logging.info("batching: %s", batching or "off")
    # One line on stdout that scripts (and the tests) wait for.
    print(f"tfnmt serve: {', '.join(manager.names())} at {url}/v1/models/", flush=True)
    if serve.demo:
        logging.info("demo page: %s/", url)
    sys.stdout.flush()
    server_lib.run_until_stopped(server, on_stop=[manager.close])
