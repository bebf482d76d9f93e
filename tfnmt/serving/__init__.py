"""A local server that speaks TensorFlow Serving's REST API for tfnmt's exported SavedModels.

Production deployments run TF Serving itself (export/tf_serving/); `tfnmt serve` is for
machines without Docker, for development, and for the tests:

    status.py    error codes and their HTTP status (TF Serving's mapping)
    config.py    TF Serving's models.config and batching parameters (protobuf text format)
    models.py    which models and versions are served; loads new versions as they appear
    batching.py  merges concurrent requests into batches
    rest.py      the REST API (WSGI): requests, routes, TF Serving's status codes and errors
    tf_json.py   JSON as TF Serving writes it (floats, layout, rows or columns)
    web_safety.py  what a web page may not do: JSON-only bodies, the Host check, the demo's CSP
    server.py    the HTTP server (waitress) around it
    client.py    the client behind `tfnmt translate --server` and `tfnmt bench --bench=serve`
    backends.py  the one factory of translation backends (checkpoint, export, served model)
"""
