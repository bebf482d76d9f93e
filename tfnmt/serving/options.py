"""`tfnmt serve`'s settings and those of a client of a served model, declared once: the flags are
generated from these fields (cli/flags.py). Names follow TF Serving's tensorflow_model_server
flags where it has one; a --batching_parameters_file overrides BatchingOptions (serving/config.py).
"""

import dataclasses

from tfnmt.options import option


@dataclasses.dataclass(frozen=True)
class ServeOptions:
    rest_api_host: str = option(
        "127.0.0.1", "tfnmt serve: address to listen on (0.0.0.0 = every interface).")
    model_config_file: str = option(
        "", "tfnmt serve: a TF Serving model config (models.config) naming the served models; "
        "instead of --export_dir (which serves every model in it).")
    rest_api_port: int = option(
        8501, "tfnmt serve: port (0 = any free port; the URL is printed).", bounds="[0, 65535]")
    rest_api_num_threads: int = option(16, "tfnmt serve: threads answering HTTP requests.",
                                       bounds=">= 1")
    rest_api_max_connections: int = option(
        100, "tfnmt serve: open connections at most; at the limit, the longest-idle connection "
        "(no request in progress) is closed to take a new one.", bounds=">= 1")
    rest_api_idle_timeout_seconds: int = option(
        30, "tfnmt serve: a connection with no traffic for this long is closed (checked every "
        "second).", bounds=">= 1")
    rest_api_allowed_hosts: str = option(
        "", "tfnmt serve: Host header names answered besides localhost, the --rest_api_host "
        "address and loopback addresses (comma-separated; * = any); other Hosts get 403, "
        "against DNS rebinding.")
    rest_api_timeout_in_ms: int = option(30000, "tfnmt serve: a request not answered by then "
                                         "fails with 504.", bounds=">= 1")
    file_system_poll_wait_seconds: int = option(
        1, "tfnmt serve: how often to look for new versions and models (0 = never).",
        bounds=">= 0")
    max_request_bytes: int = option(
        1 << 20, "tfnmt serve: largest request body (400 beyond).", bounds=">= 1")
    max_sentences_per_request: int = option(
        256, "tfnmt serve: most sentences in one request (400 beyond).", bounds=">= 1")
    max_sentence_chars: int = option(
        2000, "tfnmt serve: longest sentence, in characters (400 beyond).", bounds=">= 1")
    enable_batching: bool = option(
        True, "tfnmt serve: merge concurrent requests into batches.")
    demo: bool = option(
        True, "tfnmt serve: serve the demo page (GET /, a text box and one column of "
        "translations per served model); --nodemo turns it off.")
    batching_parameters_file: str = option(
        "", "tfnmt serve: TF Serving batching parameters (export/tf_serving/batching.config); "
        "its values override the batching flags below.")


@dataclasses.dataclass(frozen=True)
class BatchingOptions:
    """TF Serving's BatchingParameters that tfnmt serve implements (serving/batching.py)."""
    max_batch_size: int = option(32, "tfnmt serve: sentences per merged batch.", bounds=">= 1")
    num_batch_threads: int = option(
        1, "tfnmt serve: batches run at once (per model version).", bounds=">= 1")
    batch_timeout_micros: int = option(5000, "tfnmt serve: how long a batch waits to fill.",
                                       bounds=">= 0")
    max_enqueued_batches: int = option(
        100, "tfnmt serve: batches that may wait; beyond, 503.", bounds=">= 1")


@dataclasses.dataclass(frozen=True)
class ClientOptions:
    """How `translate`, `evaluate`, `score`, `distill` and `bench --bench=serve` reach a served
    model."""
    server: str = option("", "Translate (or score) through TF Serving or `tfnmt serve` at this "
                         "URL (http://HOST:8501) instead of a local model; --served_model names "
                         "the served model.")
    served_model: str = option(
        "", "With --server: the served model's name (NAME in the export's DIR/NAME/VERSION, or "
        "a name in models.config).")
    model_version: int = option(
        0, "With --server: the served version to ask for (0 = the newest).", bounds=">= 0")
    server_retries: int = option(
        5, "With --server: retries of a request after a connection error or a 503, with "
        "exponential back-off from 0.5 s (at most 8 s apart).", bounds=">= 0")
    server_timeout: float = option(
        300.0, "With --server: seconds to wait for one answer.", bounds="> 0")


@dataclasses.dataclass(frozen=True)
class ExportedModelOptions:
    signature: str = option(
        "serving_default", "Signature of a --saved_model to translate with (a "
        "non-autoregressive model's export also has `beam`).")
    saved_model: str = option("", "Use this export (SavedModel or TFLite, DIR/NAME/VERSION) "
                              "instead of a checkpoint (`bench --bench=decode`: several, "
                              "comma-separated).")
