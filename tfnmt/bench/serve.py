"""`tfnmt bench --bench=serve`: a load test of the REST API on loopback, of a running server or
of `tfnmt serve` started here, with batching on and then off."""

import tempfile


def measure(bench, client_options, url, label, sentences):
    """The load test's figures against the server at `url` (`label` names it)."""
    from tfnmt.serving.client import ServingClient, load_test
    client = ServingClient(url, client_options.served_model, client_options.model_version,
                           retries=0, timeout=client_options.server_timeout)
    for sentence in sentences[:4]:  # first calls of each path are slower
        client.predict([sentence])
    result = load_test(client, sentences, clients=bench.bench_clients,
                       seconds=bench.bench_seconds,
                       sentences_per_request=bench.bench_request_sentences)
    return dict({"bench": "serve", "model": client_options.served_model, "server": label},
                **result)


def serve_locally(bench, client_options, export_dir, sentences, serve_flags, batching):
    """The load test of `tfnmt serve --export_dir` started here with `serve_flags`; `batching`
    (BatchingOptions) where those turn batching on, else None."""
    from tfnmt.serving import server as server_lib
    with tempfile.NamedTemporaryFile(suffix=".log") as log:
        process, url = server_lib.spawn(
            [f"--export_dir={export_dir}", "--rest_api_host=127.0.0.1", "--rest_api_port=0",
             "--file_system_poll_wait_seconds=0", *serve_flags],
            log_path=log.name)
        try:
            result = measure(bench, client_options, url,
                             f"tfnmt serve, batching {'on' if batching else 'off'}", sentences)
        finally:
            server_lib.stop(process)
    result["batching"] = batching is not None
    if batching is not None:
        result.update(max_batch_size=batching.max_batch_size,
                      batch_timeout_micros=batching.batch_timeout_micros)
    return result
