"""Shared fixtures: tiny synthetic corpora, a tiny trained model, and CLI runners."""

import os
import random
import subprocess
import sys

import pytest

from tfnmt import runtime

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_DATA = os.environ.get("TFNMT_TEST_DATA", os.path.join(REPO, "..", "shared", "data"))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The workers run TensorFlow as every tfnmt process does (runtime.py: the CPU allocator).
runtime.configure()
# With a worker per core (pytest.ini) the cores are full: an op's own threads would only take
# turns with the other worker's (one thread per op: tests/models/test_deeplau.py and
# test_conv_encoder.py on two workers, 115 s -> 96 s). Child processes inherit it.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pytest.ini): a worker per core, at most 4. Each worker holds TensorFlow and
    trains its own session fixtures (about 2 GB), and the suite has few files long enough to keep
    more workers busy."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cores or 1, 4))

# Fixtures that train or export a model (seconds to a minute each): a test using one is `slow`
# (pytest.ini) as a test marked by hand is.
SLOW_FIXTURES = {"trained_model", "ctc_trained_model", "killed_and_resumed", "dense_model",
                 "dirs"}


def pytest_collection_modifyitems(items):
    for item in items:
        if SLOW_FIXTURES.intersection(item.fixturenames):
            item.add_marker(pytest.mark.slow)
    # xdist hands out files in this order (pytest.ini: --no-loadscope-reorder; its default puts
    # the files with most tests first, which left the heavy one-test files for last, one worker
    # running them while the other had nothing). Files holding a slow test go first, so the last
    # files handed out are quick ones that even out the workers' ends.
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


def pytest_sessionstart(session):
    """TensorFlow, Keras and tfnmt imported once, their ~360,000 objects frozen out of the
    garbage collector: they live as long as the worker, and every full collection (Keras's
    clear_session runs one per model; Python's own as the heap grows) would walk them again.
    tests/models/test_contract.py, test_step_memory.py and tests/experiments/test_experiment.py
    in one process: 433 s -> 351 s, gen-2 collections 40 s -> 28 s."""
    if session.config.getoption("numprocesses", 0) and "PYTEST_XDIST_WORKER" not in os.environ:
        return  # xdist's controller runs no test
    import gc

    import keras  # noqa: F401
    import tensorflow  # noqa: F401

    import tfnmt.cli.main  # noqa: F401
    runtime.trace_as_written()  # as every tfnmt process traces
    # A test calls most functions once or twice, so Grappler's rewrite at each first call (a
    # quarter of a first translation's CPU: docs/benchmarks.md, "Without Grappler, tried") is
    # never repaid in a worker; tfnmt's own processes, the ones tests start among them, keep
    # it. test_ensemble, test_export, test_deeplau and test_api, one worker each, side by side
    # (2-core AVX2): 333 -> 296 CPU-s, the same tests passing.
    tensorflow.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    _trace_without_op_stacks()
    gc.collect()
    gc.freeze()


def _trace_without_op_stacks():
    """Graph ops in a worker are made without the Python stack TensorFlow records for each (for
    the "defined at" lines of a graph op's runtime error): no test reads it, and walking the
    stack at every op a trace creates is a tenth of a heavy test file's CPU (test_deeplau,
    test_export and test_early_stopping, one worker each side by side, 2-core AVX2: 214 -> 192
    and 233 -> 200 CPU-s). Every op gets the one stack made here (the op constructor is
    `extract_stack`'s only caller outside TensorFlow's debugger), so such an error in a worker
    says the op was defined in this function. What the ops compute is unchanged; tfnmt's own
    processes, the ones tests start among them, keep the stacks. The stack reads through a
    source map and filter of its own: made with the thread's, it failed at the first traced
    function when pytest ran the tests itself (`-n 0`: "basic_string::_M_construct null not
    valid"; tests/test_conftest.py)."""
    from tensorflow.python.util import _tf_stack, tf_stack

    mapper, kept = tf_stack.SentinelMapper(), tf_stack.SentinelFilter()
    stack = _tf_stack.extract_stack(mapper.internal_map, kept.internal_set, 1)
    tf_stack.extract_stack = lambda stacklevel=1, _held=(mapper, kept): stack


_WORDS = ["cat", "dog", "house", "tree", "red", "blue", "big", "small", "runs", "sleeps",
          "the", "a", "green", "bird", "sees", "car", "old", "new", "man", "woman"]
_GERMAN = ["Katze", "Hund", "Haus", "Baum", "rot", "blau", "groß", "klein", "läuft", "schläft",
           "der", "ein", "grün", "Vogel", "sieht", "Auto", "alt", "neu", "Mann", "Frau"]


def synthetic_pairs(n, seed=0, min_len=2, max_len=7):
    """A toy language pair: word-by-word dictionary translation, word order reversed."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        idx = [rng.randrange(len(_WORDS)) for _ in range(rng.randint(min_len, max_len))]
        pairs.append((" ".join(_WORDS[i] for i in idx), " ".join(_GERMAN[i] for i in reversed(idx))))
    return pairs


def write_corpus(directory, splits=(("train", 600), ("valid", 40), ("test", 30))):
    os.makedirs(directory, exist_ok=True)
    for offset, (split, n) in enumerate(splits):
        pairs = synthetic_pairs(n, seed=offset)
        for lang, side in (("en", 0), ("de", 1)):
            with open(os.path.join(directory, f"{split}.{lang}"), "w", encoding="utf-8") as f:
                f.write("\n".join(p[side] for p in pairs) + "\n")
    return directory


TINY_MODEL_FLAGS = ["--model=transformer", "--encoder_layers=1", "--decoder_layers=1",
                    "--d_model=32", "--ffn_dim=64", "--num_heads=2", "--dropout=0.0",
                    "--vocab_size=60", "--vocab_type=word"]


def tiny_train_flags(corpus, model_dir, steps=60):
    return [f"--model_dir={model_dir}", f"--data=text:{corpus}", "--source_lang=en",
            "--target_lang=de", *TINY_MODEL_FLAGS, f"--train_steps={steps}",
            "--batch_tokens=256", "--max_source_length=20", "--max_target_length=20",
            "--learning_rate=5e-3", "--warmup_steps=20", "--log_every=10",
            f"--validate_every={steps}", f"--save_every={max(steps // 2, 1)}",
            "--bleu_sentences=0", "--beam_size=2", "--evaluate_at_end=false"]


def run_cli(*args):
    """Runs `tfnmt ARGS` in-process; returns its exit status."""
    from tfnmt.cli.main import main
    return main(["tfnmt", *args])


def run_cli_subprocess(*args, timeout=300, check=False, env=None, **kwargs):
    env = dict(env or os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "-m", "tfnmt", *args], capture_output=True,
                            text=True, timeout=timeout, env=env, **kwargs)
    if check and result.returncode != 0:
        raise AssertionError(f"tfnmt {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return result


def events(model_dir, tag):
    """(step, value) of a TensorBoard scalar the trainer logged."""
    import tensorflow as tf
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    # size_guidance 0 keeps every event (the default samples 10 per tag).
    acc = EventAccumulator(os.path.join(model_dir, "logs"), size_guidance={"tensors": 0})
    acc.Reload()
    return [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)]


def overfit_multi30k(model_dir, multi30k_dir, *model_flags, steps, learning_rate, pairs,
                     intervals=4):
    """Trains on the first `pairs` Multi30k en-de pairs (no dropout, no smoothing, constant adam lr);
    returns the logged training losses: the mean over each of `intervals` equal stretches."""
    assert steps % intervals == 0, (steps, intervals)
    assert run_cli(
        "train", f"--model_dir={model_dir}", f"--data=text:{multi30k_dir}", "--valid_split=val",
        f"--train_limit={pairs}", "--valid_limit=10", "--vocab_size=400", *model_flags,
        "--dropout=0", "--label_smoothing=0", f"--train_steps={steps}", "--batch_tokens=1024",
        f"--learning_rate={learning_rate}", "--warmup_steps=0", f"--log_every={steps // intervals}",
        f"--validate_every={steps}", f"--save_every={steps}", "--bleu_sentences=0",
        "--evaluate_at_end=false") == 0
    return [loss for _, loss in events(model_dir, "train/loss")]


def multi30k_lines(multi30k_dir, lang, n, start=0):
    with open(os.path.join(multi30k_dir, f"train.{lang}"), encoding="utf-8") as f:
        return f.read().splitlines()[start:start + n]


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return write_corpus(str(tmp_path_factory.mktemp("corpus")))


@pytest.fixture(scope="session")
def trained_model(corpus, tmp_path_factory):
    """A tiny Transformer trained for 80 steps on the synthetic corpus, validated on BLEU too."""
    model_dir = str(tmp_path_factory.mktemp("model"))
    assert run_cli("train", *tiny_train_flags(corpus, model_dir, steps=80), "--bleu_sentences=10") == 0
    return model_dir


@pytest.fixture(scope="session")
def multi30k_dir():
    path = os.path.join(TEST_DATA, "multi30k")
    if not os.path.isfile(os.path.join(path, "train.en")):
        where = "CI must provide it" if os.environ.get("CI") == "true" else "set TFNMT_TEST_DATA"
        pytest.fail(f"Multi30k test data missing at {path} ({where})")
    return path


@pytest.fixture(scope="session")
def ctc_trained_model(corpus, tmp_path_factory):
    """A tiny ctc_nat (--ctc_variant=encoder_decoder, --split_factor=1) trained for 20 steps on
    the synthetic corpus. k = 1 on reversed word-for-word pairs: a target with equal neighbours
    cannot be aligned, so some pairs are dropped. tests/models/test_ctc_nat.py checks what its
    training logged; tests/cli/test_score.py that `score` and `export --score` refuse it."""
    model_dir = str(tmp_path_factory.mktemp("ctc_model"))
    flags = [f for f in tiny_train_flags(corpus, model_dir, steps=20) if not f.startswith("--model=")]
    assert run_cli("train", *flags, "--model=ctc_nat", "--ctc_variant=encoder_decoder",
                   "--split_factor=1") == 0
    return model_dir
