import pytest
import tensorflow_datasets as tfds

from tfnmt.data import sources
from tfnmt.errors import ConfigError, DataError


def test_stock_tfds_translation_dataset_by_name():
    spec = sources.DataSpec("tfds:wmt14_translate/de-en", "en", "de")
    with tfds.testing.mock_data(num_examples=12):
        pairs = list(sources.pairs(spec, "train", limit=5).as_numpy_iterator())
    assert len(pairs) == 5
    assert all(isinstance(s, bytes) and isinstance(t, bytes) for s, t in pairs)


def test_wrong_language_of_a_tfds_dataset():
    with tfds.testing.mock_data(num_examples=4):
        with pytest.raises(ConfigError, match="not 'fr'"):
            sources.pairs(sources.DataSpec("tfds:wmt14_translate/de-en", "en", "fr"), "train")


def test_unknown_tfds_name():
    with pytest.raises(DataError, match="unknown TFDS dataset 'no_such_set'"):
        sources.pairs(sources.DataSpec("tfds:no_such_set", "en", "de"), "train")


def test_text_source_and_limit(corpus):
    spec = sources.DataSpec(f"text:{corpus}", "en", "de")
    source, reference = sources.references(spec, "valid", limit=7)
    assert len(source) == len(reference) == 7
    assert sources.default_splits(spec) == ("train", "valid", "test")


@pytest.mark.slow
def test_multi30k_real_copy_through_the_source_spec(multi30k_dir, tmp_path):
    spec = sources.DataSpec("multi30k", "en", "de", multi30k_dir, str(tmp_path))
    first = next(sources.pairs(spec, "test").as_numpy_iterator())
    with open(f"{multi30k_dir}/test_2016_flickr.de", encoding="utf-8") as f:
        assert first[1].decode() == f.readline().strip()
    with pytest.raises(ConfigError, match="splits .*'test'.*not 'dev'"):
        sources.pairs(spec, "dev")


def test_a_tfds_source_streams_its_examples(monkeypatch):
    # The mock makes each example when it is read: counting them tells how far the source
    # read to give its first pair.
    from tensorflow_datasets.testing import mocking
    made = []
    make = mocking.RandomFakeGenerator._generate_example
    monkeypatch.setattr(mocking.RandomFakeGenerator, "_generate_example",
                        lambda self, rng: made.append(1) or make(self, rng))
    spec = sources.DataSpec("tfds:wmt14_translate/de-en", "en", "de")
    with tfds.testing.mock_data(num_examples=5000):
        first = next(sources.pairs(spec, "train").as_numpy_iterator())
    assert isinstance(first[0], bytes) and first[0] and first[1]
    assert 1 <= len(made) < 100
