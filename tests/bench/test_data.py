"""tfnmt bench --bench=data: the input pipeline's figures count what an epoch holds, and the
resumed stream starts where an uninterrupted one goes on."""

import gzip
import json
import os

import pytest

from conftest import run_cli, write_corpus
from tfnmt.data import vocab


@pytest.mark.slow
def test_the_data_bench_counts_an_epoch_and_resumes_at_its_batch(tmp_path):
    corpus = write_corpus(str(tmp_path / "corpus"), splits=(("train", 300),))
    # A bad pair and a gzipped side: the bench reads the corpus as `train` does.
    with open(os.path.join(corpus, "train.en"), "a", encoding="utf-8") as f:
        f.write("\n")
    with open(os.path.join(corpus, "train.de"), "a", encoding="utf-8") as f:
        f.write("nicht leer\n")
    with open(os.path.join(corpus, "train.de"), "rb") as f, \
            gzip.open(os.path.join(corpus, "train.de.gz"), "wb") as out:
        out.write(f.read())
    os.remove(os.path.join(corpus, "train.de"))
    model_dir, output = tmp_path / "m", tmp_path / "bench.json"
    assert run_cli("bench", "--bench=data", f"--model_dir={model_dir}", f"--data=text:{corpus}",
                   "--vocab_size=60", "--vocab_type=word", "--batch_tokens=128",
                   "--max_source_length=100", "--max_target_length=100",
                   "--bench_resume_at=0.5", f"--bench_output={output}") == 0
    result = json.loads(output.read_text())
    assert result["vocab_seconds"] > 0 and os.path.isfile(model_dir / vocab.JOINT_FILE)
    # Every good pair once; its target tokens and eos, counted from the vocabulary itself.
    with open(os.path.join(corpus, "train.en"), encoding="utf-8") as f:
        sources = f.read().splitlines()
    with gzip.open(os.path.join(corpus, "train.de.gz"), "rt", encoding="utf-8") as f:
        targets = f.read().splitlines()
    good = [t for s, t in zip(sources, targets) if s.strip() and t.strip()]
    assert len(good) == 300
    target_vocab = vocab.load_vocabs(str(model_dir))[1]
    assert result["epoch_sentences"] == 300
    assert result["epoch_target_tokens"] == sum(len(target_vocab.encode(t)) + 1 for t in good)
    # Resumed from the state saved after half the epoch's batches: the next batch's position
    # is the one after.
    after = int(0.5 * result["epoch_batches"]) - 1
    assert result["epoch_batches"] > 4 and result["resumed_after_batch"] == after
    assert result["resumed_position"] == [0, after + 1]
    assert result["state_bytes"] > 0 and result["peak_rss_mb"] > 0


@pytest.mark.slow
def test_the_data_bench_runs_on_tfds_mock_data(tmp_path):
    from tfnmt.bench import data as bench_data
    from tfnmt.data import sources
    model_dir, output = tmp_path / "m", tmp_path / "bench.json"
    assert run_cli("bench", "--bench=data", f"--model_dir={model_dir}",
                   "--data=tfds:wmt14_translate/de-en", "--source_lang=en", "--target_lang=de",
                   "--bench_tfds_mock=200", "--bench_resume_at=0.5", "--vocab_size=40",
                   "--vocab_type=char", "--batch_tokens=256", f"--bench_output={output}") == 0
    result = json.loads(output.read_text())
    assert result["data"] == "tfds:wmt14_translate/de-en" and result["tfds_mock"] == 200
    # The mock's 200 examples, each once: their target tokens and eos, from the vocabulary.
    with bench_data.mock_tfds(200):
        targets = [t.decode() for _, t in sources.pairs(
            sources.DataSpec("tfds:wmt14_translate/de-en", "en", "de"), "train")
            .as_numpy_iterator()]
    target_vocab = vocab.load_vocabs(str(model_dir))[1]
    assert result["vocab_seconds"] > 0 and result["epoch_sentences"] == len(targets) == 200
    assert result["epoch_target_tokens"] == sum(len(target_vocab.encode(t)) + 1 for t in targets)
    assert result["first_batch_seconds"] > 0 and result["target_tokens_per_second"] > 0
    after = int(0.5 * result["epoch_batches"]) - 1
    assert result["resumed_after_batch"] == after and result["resumed_position"] == [0, after + 1]
    assert result["resume_seconds"] > 0 and result["peak_rss_mb"] > 0


def test_the_benchs_tfds_mock_resumes_inside_a_split(tmp_path):
    # The bench's resume saves TFDS's reader mid-split once the split outgrows what the
    # pipeline reads ahead (thousands of pairs); here the reader is saved after a few pairs.
    import tensorflow as tf

    from tfnmt.bench import data as bench_data
    from tfnmt.data import sources
    spec = sources.DataSpec("tfds:wmt14_translate/de-en", "en", "de")
    options = tf.data.Options()
    # As the training stream (data/pipeline.py): the examples' Python function is not state.
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    with bench_data.mock_tfds(50):
        whole = list(sources.pairs(spec, "train").as_numpy_iterator())
        iterator = iter(sources.pairs(spec, "train").with_options(options))
        first = [next(iterator) for _ in range(5)]
        path = tf.train.Checkpoint(data=iterator).save(str(tmp_path / "it"))
        restored = iter(sources.pairs(spec, "train").with_options(options))
        tf.train.Checkpoint(data=restored).restore(path).assert_consumed()
        rest = [(s.numpy(), t.numpy()) for s, t in restored]
    assert len(whole) == 50 and len(set(whole)) == 50
    assert [(s.numpy(), t.numpy()) for s, t in first] + rest == whole
