"""TFDS builder for IWSLT14 German-English (TED talks) with fairseq's train/valid/test split.

The split follows fairseq's ``examples/translation/prepare-iwslt14.sh``:

* ``train`` and ``validation`` come from ``train.tags.de-en.{de,en}``. Talk metadata
  lines (``<url>``, ``<talkid>``, ``<keywords>``, ``<speaker>``, ``<reviewer ...>``,
  ``<translator ...>``, ``<doc ...>``) are dropped. ``<title>`` and ``<description>``
  lines are parallel text, so, as in fairseq, only their tags are removed and the text
  stays. Pairs with an empty side are dropped. Of the remaining pairs, every 23rd
  (1-based numbers 23, 46, ...) is ``validation`` (about 7k) and the rest is ``train``.
* ``test`` is the concatenation, in this order, of IWSLT14.TED.dev2010,
  IWSLT14.TEDX.dev2012, IWSLT14.TED.tst2010, IWSLT14.TED.tst2011 and IWSLT14.TED.tst2012
  (the ``<seg id=...>`` lines of their ``.de-en.{de,en}.xml`` files), about 6.7k pairs.

Differences from fairseq, all because this project trains SentencePiece on raw text:
the text is neither lowercased nor Moses-tokenized nor BPE-segmented, and fairseq's
length filter (``clean-corpus-n.perl``: 1-175 tokens, ratio 1.5) is not applied, so the
split sizes differ slightly from fairseq's 160,239 / 7,283 / 6,750. XML character
references (``&amp;``, ``&quot;``, ``&#39;``, ...) are decoded; surrounding whitespace is
stripped. Nothing else is changed.

Where the archive comes from, first match wins:

1. ``DownloadConfig(manual_dir=DIR)`` or, failing that, ``$TFNMT_IWSLT14_DIR``;
2. TFDS's default manual folder ``<data_dir>/downloads/manual`` when it is not empty;
3. the copy of ``de-en.tgz`` that fairseq's script downloads (network).

A local folder holds ``de-en.tgz``, its extracted ``de-en/`` folder, or the files of that
folder directly. It is checked before anything is downloaded, so an offline run fails at
once with a :class:`tfnmt.errors.DataError` instead of waiting on network retries.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import tensorflow_datasets as tfds

from tfnmt.data import local_copy
from tfnmt.errors import DataError

__all__ = [
    "ARCHIVE_NAME",
    "ENV_VAR",
    "LANGUAGES",
    "TEST_SETS",
    "URL",
    "VALID_EVERY",
    "Iwslt14",
    "clean_train_line",
    "find_local_sources",
    "read_seg_lines",
    "read_train_pairs",
    "split_train_valid",
]

LANGUAGES = ("de", "en")
ENV_VAR = "TFNMT_IWSLT14_DIR"
ARCHIVE_NAME = "de-en.tgz"
_FOLDER_NAME = "de-en"
# The WIT3 address fairseq used first (wit3.fbk.eu/archive/2014-01/...) is gone; fairseq's
# script now fetches this copy of the same archive.
_HOST = "dl.fbaipublicfiles.com"
URL = f"https://{_HOST}/fairseq/data/iwslt14/{ARCHIVE_NAME}"


def _offline_error(reason: str) -> DataError:
    local_files = f"{ARCHIVE_NAME} or its extracted {_FOLDER_NAME}/ folder"
    return local_copy.offline_error(f"IWSLT14 {ARCHIVE_NAME}", _HOST, reason, local_files, ENV_VAR)


VALID_EVERY = 23
TEST_SETS = (
    "IWSLT14.TED.dev2010",
    "IWSLT14.TEDX.dev2012",
    "IWSLT14.TED.tst2010",
    "IWSLT14.TED.tst2011",
    "IWSLT14.TED.tst2012",
)

# fairseq drops lines containing <url>, <talkid> or <keywords>. The speaker, reviewer,
# translator and doc lines are metadata too; fairseq's raw-text IWSLT17 script
# (prepare-iwslt17-multilingual.sh) drops exactly this set.
_METADATA_MARKERS = ("<url>", "<talkid>", "<keywords>", "<speaker>", "<reviewer", "<translator",
                     "<doc", "</doc>")
_TEXT_TAGS = re.compile(r"</?(?:title|description)>")
_SEG = re.compile(r'^\s*<seg id="?\d+"?[^>]*>(.*?)</seg>\s*$')
_XML_REF = re.compile(r"&(?:(amp|lt|gt|quot|apos)|#(\d+)|#[xX]([0-9a-fA-F]+));")
_XML_NAMED = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}

_DESCRIPTION = (
    "IWSLT 2014 German-English TED talk transcripts and translations, split "
    "as in fairseq's prepare-iwslt14.sh. Raw text: not lowercased, not tokenized."
)

_CITATION = """\
@inproceedings{cettolo-etal-2014-report,
  title = {Report on the 11th {IWSLT} evaluation campaign},
  author = {Cettolo, Mauro and Niehues, Jan and St{\\"u}ker, Sebastian and Bentivogli, Luisa
            and Federico, Marcello},
  booktitle = {Proceedings of the 11th International Workshop on Spoken Language Translation},
  year = {2014},
  pages = {2--17},
}
"""


def _train_names() -> list[str]:
    return [f"train.tags.de-en.{lang}" for lang in LANGUAGES]


def _test_names() -> list[str]:
    return [f"{name}.de-en.{lang}.xml" for name in TEST_SETS for lang in LANGUAGES]


def _required_names() -> list[str]:
    return _train_names() + _test_names()


def _decode_xml_refs(text: str) -> str:
    def one(m: re.Match) -> str:
        named, dec, hexa = m.groups()
        if named:
            return _XML_NAMED[named]
        code = int(dec) if dec else int(hexa, 16)
        return chr(code) if 0 < code <= 0x10FFFF else m.group(0)

    return _XML_REF.sub(one, text)


def _missing(folder: Path) -> list[Path]:
    return [folder / name for name in _required_names() if not (folder / name).is_file()]


def _complete_folder(root: Path) -> Path | None:
    """root or root/de-en when it holds every required file, else None."""
    for folder in (root, root / _FOLDER_NAME):
        if folder.is_dir() and not _missing(folder):
            return folder
    return None


def find_local_sources(folder: str | os.PathLike) -> Path:
    """The folder with the extracted IWSLT14 files, or the ``de-en.tgz`` to extract.

    Looks for the files in ``folder`` itself, then in ``folder/de-en``, then for
    ``folder/de-en.tgz``. Raises DataError naming the missing paths.
    """
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise DataError(
            f"IWSLT14 folder {folder} does not exist; it must hold {ARCHIVE_NAME}, "
            f"its {_FOLDER_NAME}/ folder or that folder's files"
        )
    complete = _complete_folder(folder)
    if complete is not None:
        return complete
    archive = folder / ARCHIVE_NAME
    if archive.is_file():
        return archive
    # Name the missing files where the user most likely meant to put them.
    nested = folder / _FOLDER_NAME
    base = nested if nested.is_dir() and len(_missing(nested)) < len(_missing(folder)) else folder
    missing = _missing(base)
    raise DataError(
        f"IWSLT14 folder {folder} has no {ARCHIVE_NAME} and is missing {len(missing)} file(s): "
        + ", ".join(str(p) for p in missing)
    )


def _read_text(path: Path) -> list[str]:
    return local_copy.split_lines(path.read_bytes(), path)


def clean_train_line(line: str) -> str | None:
    """The text of one ``train.tags`` line, or None for a metadata line."""
    if any(marker in line for marker in _METADATA_MARKERS):
        return None
    return _decode_xml_refs(_TEXT_TAGS.sub("", line)).strip()


def read_train_pairs(de_path: str | os.PathLike, en_path: str | os.PathLike) -> list[tuple[str, str]]:
    """(de, en) pairs of ``train.tags.de-en.*`` without metadata lines and empty pairs."""
    columns = []
    for path in (Path(de_path), Path(en_path)):
        kept = [clean_train_line(line) for line in _read_text(path)]
        columns.append([line for line in kept if line is not None])
    de, en = columns
    if len(de) != len(en):
        raise DataError(
            f"IWSLT14 training files do not line up after dropping metadata: "
            f"{de_path} has {len(de)} lines, {en_path} has {len(en)}"
        )
    return [(d, e) for d, e in zip(de, en) if d and e]


def split_train_valid(pairs: list[tuple[str, str]]) -> tuple[list, list]:
    """fairseq's split: pair number n (1-based) is validation when n % 23 == 0."""
    train = [p for n, p in enumerate(pairs, start=1) if n % VALID_EVERY]
    valid = [p for n, p in enumerate(pairs, start=1) if not n % VALID_EVERY]
    return train, valid


def read_seg_lines(path: str | os.PathLike) -> list[str]:
    """Texts of the ``<seg id="N">...</seg>`` lines of an IWSLT XML file, in file order."""
    path = Path(path)
    out = []
    for line_no, line in enumerate(_read_text(path), start=1):
        if "<seg id" not in line:
            continue
        m = _SEG.match(line)
        if m is None:
            raise DataError(f"{path} line {line_no}: expected <seg id=\"N\">text</seg> on one line")
        out.append(_decode_xml_refs(m.group(1)).strip())
    return out


def _read_test_pairs(folder: Path) -> list[tuple[str, str]]:
    pairs = []
    for name in TEST_SETS:
        de_path, en_path = (folder / f"{name}.de-en.{lang}.xml" for lang in LANGUAGES)
        de, en = read_seg_lines(de_path), read_seg_lines(en_path)
        if len(de) != len(en):
            raise DataError(
                f"IWSLT14 test files do not line up: {de_path} has {len(de)} segments, "
                f"{en_path} has {len(en)}"
            )
        pairs.extend(zip(de, en))
    return pairs


class Iwslt14(local_copy.LocalCopyBuilder, tfds.core.GeneratorBasedBuilder):
    """IWSLT14 German-English TED talk translations, fairseq split, raw text."""

    ENV_VAR = ENV_VAR  # where LocalCopyBuilder looks for a local copy
    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "fairseq split of de-en.tgz, raw text."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = f"""\
Put {ARCHIVE_NAME} (the IWSLT 2014 de-en release that fairseq uses, {URL}),
or its extracted {_FOLDER_NAME}/ folder, or the files of that folder, in one folder and pass
it as --manual_dir=DIR (DownloadConfig(manual_dir=DIR)) or set {ENV_VAR}=DIR.
Needed: {", ".join(_train_names())} and
IWSLT14.TED.dev2010, IWSLT14.TEDX.dev2012, IWSLT14.TED.tst2010, .tst2011, .tst2012
as <name>.de-en.{{de,en}}.xml.
"""

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=_DESCRIPTION,
            features=tfds.features.Translation(languages=LANGUAGES),
            supervised_keys=LANGUAGES,
            homepage="https://wit3.fbk.eu/2014-01",
            citation=_CITATION,
            # Keep file order, so that the test split is the documented concatenation.
            disable_shuffling=True,
        )

    def _source_folder(self, dl_manager: tfds.download.DownloadManager) -> Path:
        local = self._local_folder(dl_manager)
        if local is not None:
            source = find_local_sources(local)
            if source.is_dir():
                return source
            archive = source
        else:
            archive = self._download(dl_manager, _HOST, URL, _offline_error)
        extracted = Path(os.fspath(dl_manager.extract(archive)))
        folder = _complete_folder(extracted)
        if folder is None:
            missing = [p.relative_to(extracted) for p in _missing(extracted / _FOLDER_NAME)]
            raise DataError(
                f"{archive} lacks {len(missing)} file(s) of the IWSLT14 release: "
                + ", ".join(str(p) for p in missing)
            )
        return folder

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        folder = self._source_folder(dl_manager)
        train, valid = split_train_valid(
            read_train_pairs(*(folder / name for name in _train_names()))
        )
        return {
            "train": self._generate_examples(train),
            "validation": self._generate_examples(valid),
            "test": self._generate_examples(_read_test_pairs(folder)),
        }

    def _generate_examples(self, pairs: list[tuple[str, str]]):
        for i, (de, en) in enumerate(pairs):
            yield i, {"de": de, "en": en}
