"""TFDS builder for Multi30k task 1 (cs/de/en/fr image-caption translations), raw text.

Splits: ``train`` (29,000 lines), ``validation`` (``val``, 1,014) and ``test``
(``test_2016_flickr``, 1,000, the usual "test2016"). Every example is one line of each
of the four language files. Text is kept as published (original casing, not tokenized);
only surrounding whitespace is stripped.

Where the files come from, first match wins:

1. ``DownloadConfig(manual_dir=DIR)`` or, failing that, ``$TFNMT_MULTI30K_DIR``;
2. TFDS's default manual folder ``<data_dir>/downloads/manual`` when it is not empty;
3. the multi30k/dataset GitHub repository at a pinned commit (network).

A local folder holds ``{train,val,test_2016_flickr}.{cs,de,en,fr}``, decompressed or as
``.gz``. It is checked before anything is downloaded, so an offline run fails at once
with a :class:`tfnmt.errors.DataError` instead of waiting on network retries.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import tensorflow_datasets as tfds

from tfnmt.data import local_copy
from tfnmt.errors import DataError

__all__ = [
    "ENV_VAR",
    "LANGUAGES",
    "SPLIT_FILES",
    "URL_BASE",
    "Multi30k",
    "find_local_files",
    "read_lines",
]

LANGUAGES = ("cs", "de", "en", "fr")
# TFDS split name -> file prefix in the Multi30k repository.
SPLIT_FILES = {"train": "train", "validation": "val", "test": "test_2016_flickr"}
ENV_VAR = "TFNMT_MULTI30K_DIR"

# Pinned so that a rebuild months later reads the same bytes; the files under
# data/task1/raw have not changed since 2018, the commit is the newest one.
_COMMIT = "a3d2e0d26b56f3846f66a952536ffed4e401d05a"
_HOST = "raw.githubusercontent.com"
URL_BASE = f"https://{_HOST}/multi30k/dataset/{_COMMIT}/data/task1/raw/"

_FILE_LIST = "train.{cs,de,en,fr}, val.{cs,de,en,fr} and test_2016_flickr.{cs,de,en,fr} (plain or .gz)"


def _offline_error(reason: str) -> DataError:
    return local_copy.offline_error("Multi30k", _HOST, reason, _FILE_LIST, ENV_VAR)


_DESCRIPTION = (
    "Multi30k task 1: Flickr30k image captions translated into German, French "
    "and Czech. Raw text, original casing, not tokenized."
)

_CITATION = """\
@inproceedings{elliott-etal-2016-multi30k,
  title = {Multi30K: Multilingual English-German Image Descriptions},
  author = {Elliott, Desmond and Frank, Stella and Sima'an, Khalil and Specia, Lucia},
  booktitle = {Proceedings of the 5th Workshop on Vision and Language},
  year = {2016},
  pages = {70--74},
}
"""


def _file_names() -> list[str]:
    return [f"{prefix}.{lang}" for prefix in SPLIT_FILES.values() for lang in LANGUAGES]


def find_local_files(folder: str | os.PathLike) -> dict[str, Path]:
    """Maps every required name (``"train.en"``, ...) to its file in ``folder``.

    A decompressed file wins over its ``.gz``. Raises DataError naming every missing path.
    """
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise DataError(f"Multi30k folder {folder} does not exist; it must hold {_FILE_LIST}")
    found, missing = {}, []
    for name in _file_names():
        plain, packed = folder / name, folder / f"{name}.gz"
        if plain.is_file():
            found[name] = plain
        elif packed.is_file():
            found[name] = packed
        else:
            missing.append(str(plain))
    if missing:
        raise DataError(
            f"Multi30k folder {folder} is missing {len(missing)} file(s) (or their .gz): "
            + ", ".join(missing)
        )
    return found


def read_lines(path: str | os.PathLike) -> list[str]:
    """Lines of a UTF-8 text file (gzip when the name ends in .gz), whitespace-stripped.

    Only ``\\n`` ends a line (see :func:`tfnmt.data.local_copy.split_lines`).
    """
    path = Path(path)
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise DataError(f"{path} is not a readable gzip file: {e}") from None
    return [line.strip() for line in local_copy.split_lines(data, path)]


class Multi30k(local_copy.LocalCopyBuilder, tfds.core.GeneratorBasedBuilder):
    """Multi30k task 1: 4-way parallel image captions in Czech, German, English and French."""

    ENV_VAR = ENV_VAR  # where LocalCopyBuilder looks for a local copy
    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Raw text of task 1, test = test_2016_flickr."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = f"""\
Put the Multi30k task 1 files {_FILE_LIST} in one folder and pass it as
--manual_dir=DIR (DownloadConfig(manual_dir=DIR)) or set {ENV_VAR}=DIR.
They are data/task1/raw/*.gz of https://github.com/multi30k/dataset (commit {_COMMIT[:8]}),
e.g. {URL_BASE}train.en.gz; decompressing them is optional.
"""

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=_DESCRIPTION,
            features=tfds.features.Translation(languages=LANGUAGES),
            homepage="https://github.com/multi30k/dataset",
            citation=_CITATION,
            # Keep file order: line i of the source files is example i of the split.
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        folder = self._local_folder(dl_manager)
        if folder is not None:
            files = find_local_files(folder)
        else:
            urls = {name: f"{URL_BASE}{name}.gz" for name in _file_names()}
            files = self._download(dl_manager, _HOST, urls, _offline_error)
        return {
            split: self._generate_examples(
                {lang: files[f"{prefix}.{lang}"] for lang in LANGUAGES}
            )
            for split, prefix in SPLIT_FILES.items()
        }

    def _generate_examples(self, paths: dict[str, Path]):
        columns = {lang: read_lines(path) for lang, path in paths.items()}
        sizes = {len(lines) for lines in columns.values()}
        if len(sizes) != 1:
            counts = ", ".join(f"{paths[lang]}: {len(columns[lang])}" for lang in LANGUAGES)
            raise DataError(f"Multi30k files differ in line count ({counts})")
        for i in range(sizes.pop()):
            yield i, {lang: columns[lang][i] for lang in LANGUAGES}
