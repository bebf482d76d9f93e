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
import socket
import urllib.request
from pathlib import Path

import tensorflow_datasets as tfds
from etils import epath

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

    Only ``\\n`` ends a line: Python's universal newlines would also split on a stray
    ``\\r`` or U+2028 inside a sentence and break the line alignment between languages.
    """
    path = Path(path)
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise DataError(f"{path} is not a readable gzip file: {e}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line_no = data.count(b"\n", 0, e.start) + 1
        raise DataError(f"{path} line {line_no} is not valid UTF-8: {e.reason}") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.strip() for line in lines]


def _reachable(host: str, port: int = 443, timeout: float = 5.0) -> bool:
    """Whether a TCP connection to host can be opened (always True behind a proxy).

    TFDS retries a failed request ten times with exponential backoff, which keeps an
    offline machine waiting for about 200 s before it reports anything.
    """
    if urllib.request.getproxies():
        return True
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _offline_error(reason: str) -> DataError:
    return DataError(
        f"could not download Multi30k from {_HOST} ({reason}; no network?): put {_FILE_LIST} "
        f"in a folder and pass --manual_dir=DIR (or set {ENV_VAR})"
    )


class Multi30k(tfds.core.GeneratorBasedBuilder):
    """Multi30k task 1: 4-way parallel image captions in Czech, German, English and French."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Raw text of task 1, test = test_2016_flickr."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = f"""\
Put the Multi30k task 1 files {_FILE_LIST} in one folder and pass it as
--manual_dir=DIR (DownloadConfig(manual_dir=DIR)) or set {ENV_VAR}=DIR.
They are data/task1/raw/*.gz of https://github.com/multi30k/dataset (commit {_COMMIT[:8]}),
e.g. {URL_BASE}train.en.gz; decompressing them is optional.
"""

    # TFDS 4.9.10 derives this through `importlib_resources`, which it needs but does
    # not install on Python >= 3.9 (tensorflow/datasets#11212); naming the file directly
    # avoids that import. TFDS reads checksums.tsv and metadata next to this path.
    code_path = epath.Path(__file__)

    _manual_dir_arg: str | None = None

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=(
                "Multi30k task 1: Flickr30k image captions translated into German, French "
                "and Czech. Raw text, original casing, not tokenized."
            ),
            features=tfds.features.Translation(languages=LANGUAGES),
            homepage="https://github.com/multi30k/dataset",
            citation=_CITATION,
            # Keep file order: line i of the source files is example i of the split.
            disable_shuffling=True,
        )

    def download_and_prepare(self, *, download_config=None, **kwargs) -> None:
        # The download manager only knows TFDS's default manual folder, so remember
        # whether the caller named one: a named folder must hold the data.
        self._manual_dir_arg = os.fspath(download_config.manual_dir) if (
            download_config is not None and download_config.manual_dir
        ) else None
        try:
            super().download_and_prepare(download_config=download_config, **kwargs)
        finally:
            self._manual_dir_arg = None

    def _local_folder(self, dl_manager: tfds.download.DownloadManager) -> Path | None:
        named = self._manual_dir_arg or os.environ.get(ENV_VAR) or None
        if named:
            return Path(named).expanduser()
        try:
            return Path(os.fspath(dl_manager.manual_dir))
        except AssertionError:  # TFDS's way of saying the default folder is absent or empty
            return None

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        folder = self._local_folder(dl_manager)
        if folder is not None:
            files = find_local_files(folder)
        else:
            if not _reachable(_HOST):
                raise _offline_error(f"cannot connect to {_HOST}")
            urls = {name: f"{URL_BASE}{name}.gz" for name in _file_names()}
            try:
                files = {name: Path(os.fspath(p)) for name, p in dl_manager.download(urls).items()}
            except Exception as e:  # any failure means the same remedy: a local copy
                raise _offline_error(type(e).__name__) from e
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
