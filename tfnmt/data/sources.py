"""Where sentence pairs come from: TFDS datasets (ours or stock) and plain text files.

A source spec is one string:
  multi30k               project TFDS builder (Multi30k task 1, en/de/fr/cs)
  iwslt14                project TFDS builder (IWSLT14 de-en, fairseq split)
  tfds:NAME              any TFDS translation dataset, e.g. tfds:wmt14_translate/de-en
  text:DIR               plain files DIR/{split}.{lang} (or .gz), read as streams, or their
                         shards DIR/{split}.{lang}-SUFFIX read in turn, e.g.
                         text:../shared/data/multi30k

Every source yields a `tf.data.Dataset` of (source string, target string) pairs.
"""

import contextlib
import dataclasses
import io
import os
import sys

import tensorflow as tf
from absl import logging

from tfnmt.data import text_files
from tfnmt.errors import ConfigError, DataError

# Environment variables that point the project builders at a local copy of their data.
MANUAL_DIR_ENV = {"multi30k": "TFNMT_MULTI30K_DIR", "iwslt14": "TFNMT_IWSLT14_DIR"}


@dataclasses.dataclass
class DataSpec:
    source: str
    source_lang: str
    target_lang: str
    manual_dir: str = ""
    tfds_data_dir: str = ""

    @property
    def kind(self):
        return self.source.split(":", 1)[0]

    @property
    def location(self):
        return self.source.split(":", 1)[1] if ":" in self.source else ""


def _project_builder(name, data_dir):
    if name == "multi30k":
        from tfnmt.data.multi30k import Multi30k
        return Multi30k(data_dir=data_dir or None)
    from tfnmt.data.iwslt14 import Iwslt14
    return Iwslt14(data_dir=data_dir or None)


def _tfds_pairs(spec, split, limit):
    import tensorflow_datasets as tfds
    if spec.kind in MANUAL_DIR_ENV:
        manual_dir = spec.manual_dir or os.environ.get(MANUAL_DIR_ENV[spec.kind], "")
        builder = _project_builder(spec.kind, spec.tfds_data_dir)
    else:
        manual_dir = spec.manual_dir
        try:
            builder = tfds.builder(spec.location, data_dir=spec.tfds_data_dir or None)
        except Exception as e:  # tfds raises several types for unknown names
            raise DataError(f"unknown TFDS dataset {spec.location!r}: {str(e).splitlines()[0]}") from None
    languages = getattr(builder.info.features, "languages", None)
    if languages is not None:
        for lang in (spec.source_lang, spec.target_lang):
            if lang not in languages:
                raise ConfigError(f"{spec.source} has languages {sorted(languages)}, not {lang!r}")
    if not builder.is_prepared():
        config = tfds.download.DownloadConfig(manual_dir=manual_dir or None, try_download_gcs=False)
        logging.info("preparing %s in %s (once; later runs read it from there)", spec.source,
                     builder.data_dir)
        # TFDS prints its progress bars, and two lines to stdout (which carries results, e.g.
        # evaluate's scores); they are detail, shown with --verbosity=1.
        detail = logging.level_debug()
        tfds.display_progress_bar(detail)
        try:
            with contextlib.redirect_stdout(sys.stderr if detail else io.StringIO()):
                builder.download_and_prepare(download_config=config)
        except DataError:
            raise
        except Exception as e:
            hint = (f" (or set {MANUAL_DIR_ENV[spec.kind]})" if spec.kind in MANUAL_DIR_ENV else "")
            raise DataError(f"could not prepare {spec.source}: {str(e).splitlines()[0]}; "
                            f"with no network, pass --manual_dir=DIR with a local copy{hint}") from None
    # (A mocked builder, as in tfds.testing.mock_data, knows no splits.)
    if builder.info.splits and split not in builder.info.splits:
        raise ConfigError(f"{spec.source} has splits {sorted(builder.info.splits)}, not {split!r}")
    dataset = builder.as_dataset(split=split, shuffle_files=False)
    if limit:
        dataset = dataset.take(limit)
    return dataset.map(lambda ex: (ex[spec.source_lang], ex[spec.target_lang]))


def _text_pairs(spec, split, limit):
    directory = spec.location
    if not directory:
        raise ConfigError("--data=text:DIR needs a directory")
    return text_files.sharded_parallel_dataset(text_files.corpus_shards(
        directory, f"{split}.{spec.source_lang}", f"{split}.{spec.target_lang}"), limit)


def pairs(spec, split, limit=0):
    """A dataset of (source, target) tf.string scalars for one split, in corpus order."""
    if spec.kind in ("multi30k", "iwslt14", "tfds"):
        return _tfds_pairs(spec, split, limit)
    if spec.kind == "text":
        return _text_pairs(spec, split, limit)
    raise ConfigError(f"unknown data source {spec.source!r}: use multi30k, iwslt14, "
                      "tfds:NAME or text:DIR")


# Pairs pulled from tf.data into Python at a time: one pair at a time, the iterator's own cost
# (about 90 us a pair) was 96% of a 4.5M-pair vocabulary's reading.
_PULLED = 4096


def _pulled(spec, split, limit):
    for sources, targets in pairs(spec, split, limit).batch(_PULLED).as_numpy_iterator():
        yield from zip(sources, targets)


def sentences(spec, split, limit=0, sides=("source", "target")):
    """Yields the split's sentences as Python str (for vocabulary training)."""
    for source, target in _pulled(spec, split, limit):
        if "source" in sides:
            yield source.decode("utf-8")
        if "target" in sides:
            yield target.decode("utf-8")


def references(spec, split, limit=0):
    """(sources, references) of a split as lists of str, for scoring."""
    sources, targets = [], []
    for source, target in _pulled(spec, split, limit):
        sources.append(source.decode("utf-8"))
        targets.append(target.decode("utf-8"))
    return sources, targets


def default_splits(spec):
    """(train, validation, test) split names that the source uses."""
    if spec.kind == "text":
        return "train", "valid", "test"
    return "train", "validation", "test"
