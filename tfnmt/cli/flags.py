"""Every tfnmt flag, defined once. All commands share one flag namespace, so one flagfile can
drive vocab, train, evaluate, translate and export alike."""

from absl import flags

from tfnmt.models import registry

# --- where things are --------------------------------------------------------------------------
flags.DEFINE_string("model_dir", None, "Directory of the model: config, vocabulary, checkpoints.")
flags.DEFINE_string("model", None, "Registered model name (`tfnmt info` without --model lists them); with "
                    "--server, the served model's name.")
flags.DEFINE_string("data", "multi30k", "Data source: multi30k, iwslt14, tfds:NAME or text:DIR.")
flags.DEFINE_string("source_lang", "en", "Source language code.")
flags.DEFINE_string("target_lang", "de", "Target language code.")
flags.DEFINE_string("manual_dir", "", "Local copy of a dataset's files, for offline machines "
                    "(defaults to $TFNMT_MULTI30K_DIR / $TFNMT_IWSLT14_DIR for those builders).")
flags.DEFINE_string("tfds_data_dir", "", "Where TFDS stores prepared datasets (default: TFDS's).")
flags.DEFINE_string("train_split", "", "Training split (default: train).")
flags.DEFINE_string("valid_split", "", "Validation split (default: validation; valid for text:DIR).")
flags.DEFINE_string("test_split", "", "Test split (default: test).")
flags.DEFINE_integer("train_limit", 0, "Use only the first N training pairs (0 = all).")
flags.DEFINE_integer("valid_limit", 0, "Use only the first N validation pairs (0 = all).")
flags.DEFINE_integer("test_limit", 0, "Use only the first N test pairs (0 = all).")

# --- vocabulary ---------------------------------------------------------------------------------
flags.DEFINE_integer("vocab_size", 8000, "SentencePiece vocabulary size (a soft limit).")
flags.DEFINE_enum("vocab_type", "unigram", ["unigram", "bpe", "char", "word"], "SentencePiece model type.")
flags.DEFINE_boolean("joint_vocab", True, "One vocabulary for both languages (else one per side).")
flags.DEFINE_integer("vocab_max_sentences", 2_000_000, "Sentences sampled to train SentencePiece.")

# --- training -----------------------------------------------------------------------------------
flags.DEFINE_integer("train_steps", 10000, "Total optimizer steps; a resumed run continues to it.")
flags.DEFINE_integer("batch_tokens", 4096, "Tokens per batch (padding included); 0 to use --batch_size.")
flags.DEFINE_integer("batch_size", 0, "Sentences per batch (instead of --batch_tokens).")
flags.DEFINE_integer("accumulate_steps", 1, "Gradient accumulation: one optimizer step per N "
                     "batches, the loss averaged over all their target tokens.", lower_bound=1)
flags.DEFINE_integer("max_source_length", 100, "Longest source (subwords) kept for training.")
flags.DEFINE_integer("max_target_length", 100, "Longest target (subwords) kept for training.")
flags.DEFINE_integer("shuffle_buffer", 100_000, "Shuffle buffer, in sentence pairs.")
flags.DEFINE_integer("seed", 1234, "Seed for initialisation, shuffling and SentencePiece.")
flags.DEFINE_enum("optimizer", "adam", ["adam", "nag", "adadelta"], "Optimizer.")
flags.DEFINE_float("learning_rate", 1e-3, "Peak (adam) or initial (nag, adadelta) learning rate.")
flags.DEFINE_integer("warmup_steps", 4000, "Adam: linear warm-up steps before inverse-sqrt decay (0 = constant).")
flags.DEFINE_float("adam_beta2", 0.98, "Adam beta_2.")
flags.DEFINE_float("momentum", 0.99, "NAG momentum.")
flags.DEFINE_float("clip_norm", 0.0, "Clip gradients to this global norm (0 = off).")
flags.DEFINE_float("lr_shrink", 0.1, "NAG: multiply the lr by this when validation loss rises.")
flags.DEFINE_float("lr_floor", 1e-4, "NAG: stop when the lr falls below this.")
flags.DEFINE_enum("lr_shrink_mode", "on_rise", ["on_rise", "after_first_rise"],
                  "NAG: on_rise shrinks the lr each time validation loss rises; after_first_rise "
                  "shrinks it at every validation once the loss has risen (ConvS2S, DenseNMT WMT14).")
flags.DEFINE_float("label_smoothing", 0.1, "Label smoothing of the cross-entropy.")
flags.DEFINE_enum("precision", "float32", ["float32", "mixed_float16", "mixed_bfloat16"],
                  "Keras dtype policy (mixed_float16 on GPUs).")
flags.DEFINE_integer("save_every", 1000, "Save a checkpoint every N steps.")
flags.DEFINE_integer("keep_checkpoints", 5, "Keep the last N checkpoints.")
flags.DEFINE_integer("keep_best", 5, "Keep the N best checkpoints by --best_metric.")
flags.DEFINE_enum("best_metric", "loss", ["loss", "bleu"],
                  "Validation metric that ranks the best checkpoints (best/, `average "
                  "--average_from=best`, `--checkpoint=best`): loss, or BLEU on --bleu_sentences.")
flags.DEFINE_integer("validate_every", 1000, "Validation loss and BLEU every N steps.")
flags.DEFINE_boolean("validate_per_epoch", False, "Validate (and run the NAG lr shrink) at the "
                     "end of each epoch of the training data instead of every --validate_every steps.")
flags.DEFINE_integer("log_every", 100, "Log loss, lr and throughput every N steps.")
flags.DEFINE_integer("bleu_sentences", 200, "Validation sentences translated for BLEU (0 = none).")
flags.DEFINE_boolean("jit_compile", False, "XLA-compile the training step.")
flags.DEFINE_boolean("deterministic", False, "Bit-reproducible training (TensorFlow op "
                     "determinism; slower). Without it only the data order is reproducible.")
flags.DEFINE_string("init_from", "", "Warm start a new run from this model directory or "
                    "checkpoint: weights with the same path and shape are loaded, the others are "
                    "initialised (ignored when --model_dir already has a checkpoint).")
flags.DEFINE_boolean("evaluate_at_end", True, "After training, score the test split with sacreBLEU.")
flags.DEFINE_enum("distribution", "none", ["none", "mirrored", "multi_worker"],
                  "Data-parallel training on tf.distribute: none (one device), mirrored (every "
                  "GPU of this host), multi_worker (the hosts of $TF_CONFIG). --batch_tokens and "
                  "--batch_size are per replica.")

# --- decoding -----------------------------------------------------------------------------------
flags.DEFINE_integer("beam_size", 4, "Beam size (1 = greedy).")
flags.DEFINE_float("length_penalty", 0.6, "Length penalty exponent alpha (0 = none).")
flags.DEFINE_enum("length_penalty_mode", "gnmt", ["gnmt", "length"],
                  "gnmt: ((5+|y|)/6)^alpha; length: |y|^alpha (alpha 1 = average log-prob).")
flags.DEFINE_float("max_length_ratio", 1.5, "Decode at most ratio x source length + offset tokens.")
flags.DEFINE_integer("max_length_offset", 10, "See --max_length_ratio.")
flags.DEFINE_integer("max_decode_length", 256, "Hard cap on generated tokens.")
flags.DEFINE_integer("max_input_length", 1024, "Source subwords beyond this are cut, with a warning.")
flags.DEFINE_enum("long_input", "chunk", ["chunk", "error"],
                  "A source longer than the model's source window (conv_encoder's k̄): translate "
                  "it in chunks and join them, or stop with an error. Other models read any length.")
flags.DEFINE_integer("decode_batch_size", 32, "Sentences per decoding batch.")
flags.DEFINE_string("checkpoint", "", "Checkpoint to use: '' (latest), 'best' or a path.")
flags.DEFINE_string("saved_model", "", "Use this export (SavedModel or TFLite, DIR/NAME/VERSION) "
                    "instead of a checkpoint (`bench --bench=decode`: several, comma-separated).")
flags.DEFINE_string("signature", "serving_default", "Signature of a --saved_model to translate "
                    "with (a non-autoregressive model's export also has `beam`).")
flags.DEFINE_string("server", "", "Translate through TF Serving or `tfnmt serve` at this URL "
                    "(http://HOST:8501) instead of a local model; --model names the served model.")
flags.DEFINE_integer("model_version", 0, "With --server: the served version to ask for (0 = the newest).")
flags.DEFINE_integer("server_retries", 5, "With --server: retries of a request after a connection "
                     "error or a 503, with exponential back-off from 0.5 s (at most 8 s apart).")
flags.DEFINE_float("server_timeout", 300.0, "With --server: seconds to wait for one answer.")
flags.DEFINE_string("input", "-", "File to translate ('-' = stdin).")
flags.DEFINE_string("output", "-", "Where translations go ('-' = stdout).")
flags.DEFINE_boolean("lowercase", False, "Case-insensitive BLEU (the default is cased).")
flags.DEFINE_string("length_buckets", "", "evaluate: also BLEU by source length in words, with "
                    "these bucket edges, e.g. 10,20,30,40 ('' = off).")

# --- export, average ----------------------------------------------------------------------------
flags.DEFINE_enum("format", "saved_model", ["saved_model", "tflite"],
                  "Export format: a TF Serving SavedModel (text in, text out) or a TFLite "
                  "flatbuffer for phones (ids in, ids out; SentencePiece model beside it).")
flags.DEFINE_enum("quantize", "none", ["none", "dynamic", "float16"],
                  "TFLite weights: float32, dynamic-range int8, or float16.")
flags.DEFINE_string("export_dir", None, "Export base directory; the model goes to DIR/NAME/VERSION.")
flags.DEFINE_string("export_name", "", "Served model name (default: the model's registry name).")
flags.DEFINE_integer("export_version", 0, "Version directory (0 = one more than the newest there).")
flags.DEFINE_integer("num_checkpoints", 5, "How many checkpoints `average` averages.")
flags.DEFINE_enum("average_from", "last", ["last", "best"],
                  "Average the last N or the N best (by the --best_metric training used).")
flags.DEFINE_string("output_dir", None, "Model directory that `average` writes; text corpus "
                    "directory that `distill` writes.")

# --- serve ---------------------------------------------------------------------------------------
# Names follow TF Serving's tensorflow_model_server flags where it has one.
flags.DEFINE_string("model_config_file", "", "tfnmt serve: a TF Serving model config (models.config) "
                    "naming the served models; instead of --export_dir (which serves every model in it).")
flags.DEFINE_string("rest_api_host", "127.0.0.1", "tfnmt serve: address to listen on (0.0.0.0 = every interface).")
flags.DEFINE_integer("rest_api_port", 8501, "tfnmt serve: port (0 = any free port; the URL is printed).")
flags.DEFINE_integer("rest_api_num_threads", 16, "tfnmt serve: threads answering HTTP requests.")
flags.DEFINE_integer("rest_api_timeout_in_ms", 30000, "tfnmt serve: a request not answered by then fails with 504.")
flags.DEFINE_integer("file_system_poll_wait_seconds", 1, "tfnmt serve: how often to look for new "
                     "versions and models (0 = never).")
flags.DEFINE_boolean("enable_batching", True, "tfnmt serve: merge concurrent requests into batches.")
flags.DEFINE_string("batching_parameters_file", "", "tfnmt serve: TF Serving batching parameters "
                    "(export/tf_serving/batching.config); its values override the four flags below.")
flags.DEFINE_integer("max_batch_size", 32, "tfnmt serve: sentences per merged batch.")
flags.DEFINE_integer("batch_timeout_micros", 5000, "tfnmt serve: how long a batch waits to fill.")
flags.DEFINE_integer("num_batch_threads", 1, "tfnmt serve: batches run at once (per model version).")
flags.DEFINE_integer("max_enqueued_batches", 100, "tfnmt serve: batches that may wait; beyond, 503.")
flags.DEFINE_integer("max_request_bytes", 1 << 20, "tfnmt serve: largest request body (400 beyond).")
flags.DEFINE_integer("max_sentences_per_request", 256, "tfnmt serve: most sentences in one request (400 beyond).")
flags.DEFINE_integer("max_sentence_chars", 2000, "tfnmt serve: longest sentence, in characters (400 beyond).")

# --- bench ---------------------------------------------------------------------------------------
flags.DEFINE_enum("bench", "translate", ["train", "translate", "decode", "serve"],
                  "What `tfnmt bench` measures (decode: several --saved_model=A,B,... side by "
                  "side; serve: a REST load test).")
flags.DEFINE_integer("bench_steps", 30, "Timed training steps (after 5 warm-up steps).")
flags.DEFINE_integer("bench_sentences", 256, "Test sentences translated for the speed benchmark.")
flags.DEFINE_integer("bench_latency_sentences", 50, "Sentences translated one by one for latency.")
flags.DEFINE_integer("bench_clients", 8, "--bench=serve: concurrent clients.")
flags.DEFINE_float("bench_seconds", 20.0, "--bench=serve: how long each load runs.")
flags.DEFINE_integer("bench_request_sentences", 1, "--bench=serve: sentences per request.")

# --- model hyper-parameters: one flag per name declared by any registered model ----------------
HPARAM_NAMES = registry.define_hparam_flags()

FLAGS = flags.FLAGS
