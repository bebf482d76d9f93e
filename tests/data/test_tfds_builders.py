"""Tests of the project TFDS builders Multi30k and Iwslt14 (tfnmt/data/multi30k.py, iwslt14.py,
and the local_copy.py they share).

Most tests build from tiny fake copies written to tmp_path; no test touches the network
(an autouse fixture turns any download attempt into a failure). One test builds Multi30k
from the real copy in $TFNMT_TEST_DATA/multi30k (default: ../shared/data/multi30k next
to the repository); it fails, never skips, when that copy is missing.
"""

from __future__ import annotations

import gzip
import os
import socket
import tarfile
import time
import urllib.request
from pathlib import Path

import pytest
import requests
import tensorflow_datasets as tfds

from conftest import REPO
from tfnmt.data import iwslt14, local_copy, multi30k
from tfnmt.data.iwslt14 import Iwslt14
from tfnmt.data.multi30k import Multi30k
from tfnmt.errors import DataError

REPO_ROOT = Path(REPO)
# Kept before the autouse fixture replaces it, for the test of the probe itself.
REAL_PROBE = local_copy.reachable


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any download or connection probe is a test failure unless a test replaces it."""
    monkeypatch.delenv(multi30k.ENV_VAR, raising=False)
    monkeypatch.delenv(iwslt14.ENV_VAR, raising=False)

    def refuse(*args, **kwargs):
        raise AssertionError("the builder tried to reach the network")

    monkeypatch.setattr(tfds.download.DownloadManager, "download", refuse)
    monkeypatch.setattr(local_copy, "reachable", refuse)


def build(builder_cls, data_dir: Path, manual_dir: Path | None = None):
    builder = builder_cls(data_dir=os.fspath(data_dir))
    config = tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir) if manual_dir else None)
    builder.download_and_prepare(download_config=config)
    return builder


def read(builder, split: str) -> list[dict[str, str]]:
    return [
        {lang: text.decode("utf-8") for lang, text in ex.items()}
        for ex in tfds.as_numpy(builder.as_dataset(split=split))
    ]


# --------------------------------------------------------------------------- Multi30k

M30K_SIZES = {"train": 12, "val": 5, "test_2016_flickr": 4}
M30K_WORDS = {"cs": "čtyři koně", "de": "Mädchen läuft", "en": "a dog", "fr": "un été"}


def m30k_line(prefix: str, lang: str, i: int) -> str:
    return f"{prefix} {i} {M30K_WORDS[lang]}"


def write_multi30k(folder: Path, packed: bool = False) -> Path:
    folder.mkdir(parents=True)
    for prefix, n in M30K_SIZES.items():
        for lang in multi30k.LANGUAGES:
            lines = [m30k_line(prefix, lang, i) for i in range(n)]
            lines[1] = f"  {lines[1]} "  # surrounding blanks are stripped
            data = ("\n".join(lines) + "\n").encode("utf-8")
            if packed:
                (folder / f"{prefix}.{lang}.gz").write_bytes(gzip.compress(data))
            else:
                (folder / f"{prefix}.{lang}").write_bytes(data)
    return folder


def expected_m30k(prefix: str, i: int) -> dict[str, str]:
    return {lang: m30k_line(prefix, lang, i) for lang in multi30k.LANGUAGES}


def test_multi30k_builds_from_plain_files(tmp_path):
    builder = build(Multi30k, tmp_path / "tfds", write_multi30k(tmp_path / "m30k"))

    assert builder.name == "multi30k" and str(builder.version) == "1.0.0"
    assert {s: builder.info.splits[s].num_examples for s in ("train", "validation", "test")} == {
        "train": 12, "validation": 5, "test": 4}
    train, valid, test = (read(builder, s) for s in ("train", "validation", "test"))
    assert train[0] == expected_m30k("train", 0)
    assert train[1] == expected_m30k("train", 1)
    assert train == [expected_m30k("train", i) for i in range(12)]
    assert valid[4] == expected_m30k("val", 4)
    assert test[3] == expected_m30k("test_2016_flickr", 3)
    assert train[0]["cs"] == "train 0 čtyři koně"
    assert train[0]["de"] == "train 0 Mädchen läuft"
    assert train[0]["fr"] == "train 0 un été"


def test_multi30k_builds_from_gz_named_by_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv(multi30k.ENV_VAR, os.fspath(write_multi30k(tmp_path / "m30k", packed=True)))
    builder = build(Multi30k, tmp_path / "tfds")

    assert read(builder, "validation") == [expected_m30k("val", i) for i in range(5)]
    assert read(builder, "test")[0] == expected_m30k("test_2016_flickr", 0)


def test_multi30k_uses_the_tfds_default_manual_folder(tmp_path):
    write_multi30k(tmp_path / "tfds" / "downloads" / "manual")
    builder = build(Multi30k, tmp_path / "tfds")

    assert read(builder, "test") == [expected_m30k("test_2016_flickr", i) for i in range(4)]


def test_multi30k_missing_files_are_named(tmp_path):
    folder = write_multi30k(tmp_path / "m30k")
    (folder / "val.fr").unlink()
    (folder / "test_2016_flickr.cs").unlink()

    with pytest.raises(DataError) as err:
        build(Multi30k, tmp_path / "tfds", folder)
    message = str(err.value)
    assert "\n" not in message
    assert os.fspath(folder / "val.fr") in message
    assert os.fspath(folder / "test_2016_flickr.cs") in message
    assert "train.en" not in message
    assert not (tmp_path / "tfds" / "multi30k" / "1.0.0").exists()


def test_multi30k_named_folder_must_exist(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        build(Multi30k, tmp_path / "tfds", tmp_path / "nowhere")


def test_multi30k_line_count_mismatch(tmp_path):
    folder = write_multi30k(tmp_path / "m30k")
    (folder / "val.de").write_text("only one line\n", encoding="utf-8")

    with pytest.raises(DataError, match="line count"):
        build(Multi30k, tmp_path / "tfds", folder)


@pytest.mark.slow
def test_multi30k_real_copy(tmp_path):
    root = Path(os.environ.get("TFNMT_TEST_DATA") or REPO_ROOT.parent / "shared" / "data")
    folder = root / "multi30k"
    if not folder.is_dir():
        where = "CI must provide it" if os.environ.get("CI", "").lower() == "true" else (
            "this test is never skipped")
        pytest.fail(
            f"real Multi30k copy not found at {folder}: set TFNMT_TEST_DATA to the folder that "
            f"holds multi30k/{{train,val,test_2016_flickr}}.{{cs,de,en,fr}} ({where})"
        )
    builder = build(Multi30k, tmp_path / "tfds", folder)

    sizes = {s: builder.info.splits[s].num_examples for s in ("train", "validation", "test")}
    assert sizes == {"train": 29000, "validation": 1014, "test": 1000}
    first = next(iter(tfds.as_numpy(builder.as_dataset(split="train"))))
    for lang in ("en", "de"):
        with open(folder / f"train.{lang}", encoding="utf-8") as f:
            assert first[lang].decode("utf-8") == f.readline().strip()


# --------------------------------------------------------------------------- IWSLT14

def talk_lines(lang: str, talk: int, sentences: range) -> tuple[list[str], list[str]]:
    """(train.tags lines, expected texts) of one fake talk."""
    de = lang == "de"
    title = f"Vortrag {talk}: Größe" if de else f"Talk {talk}: size"
    description = f"Beschreibung {talk} über Bäume" if de else f"Description {talk} about trees"
    lines = [
        f"<url>http://www.ted.com/talks/talk_{talk}.html</url>",
        "<keywords>talks, science, trees</keywords>",
        f"<speaker>Sprecher {talk}</speaker>",
        f"<talkid>{talk}</talkid>",
        f"<title>{title}</title>",
        f"<description>{description}</description>",
        '<reviewer href="http://www.ted.com/profiles/1">Ann</reviewer>',
        '<translator href="http://www.ted.com/profiles/2">Bob</translator>',
    ]
    texts = [title, description]
    for n in sentences:
        text = f"Satz {n}: Grüße aus Köln" if de else f"Sentence {n}: café & naïve"
        lines.append(text)
        texts.append(text)
    return lines, texts


SEGS_PER_SET = {"IWSLT14.TED.dev2010": 2, "IWSLT14.TEDX.dev2012": 3, "IWSLT14.TED.tst2010": 2,
                "IWSLT14.TED.tst2011": 1, "IWSLT14.TED.tst2012": 2}


def seg_text(name: str, lang: str, i: int) -> str:
    return f"{name} {i} {'Straße' if lang == 'de' else 'street'}"


def write_iwslt_files(folder: Path) -> dict[str, list[tuple[str, str]]]:
    """Writes a fake de-en release into folder; returns the expected pairs per split."""
    folder.mkdir(parents=True)
    texts = {}
    for lang in iwslt14.LANGUAGES:
        lines1, texts1 = talk_lines(lang, 1, range(1, 26))
        lines2, texts2 = talk_lines(lang, 2, range(26, 46))
        lines2.insert(12, "")  # an empty pair, dropped before numbering
        (folder / f"train.tags.de-en.{lang}").write_text("\n".join(lines1 + lines2) + "\n",
                                                         encoding="utf-8")
        texts[lang] = texts1 + texts2
    pairs = list(zip(texts["de"], texts["en"]))
    assert len(pairs) == 49

    for name in iwslt14.TEST_SETS:
        for lang in iwslt14.LANGUAGES:
            segs = [f'<seg id="{i + 1}"> {seg_text(name, lang, i)} </seg>'
                    for i in range(SEGS_PER_SET[name])]
            xml = "\n".join([
                '<?xml version="1.0" encoding="UTF-8"?>',
                "<mteval>",
                f'<srcset setid="{name}" srclang="{lang}">',
                '<doc docid="535" genre="lectures">',
                "<url>http://www.ted.com/talks/x.html</url>",
                "<description>TED Talk Subtitles and Transcript: metadata</description>",
                "<keywords>talks, metadata</keywords>",
                "<talkid>535</talkid>",
                "<title>Metadata title</title>",
                *segs,
                "</doc>",
                "</srcset>",
                "</mteval>",
            ])
            (folder / f"{name}.de-en.{lang}.xml").write_text(xml + "\n", encoding="utf-8")
    test = [(seg_text(name, "de", i), seg_text(name, "en", i))
            for name in iwslt14.TEST_SETS for i in range(SEGS_PER_SET[name])]
    valid = [pairs[22], pairs[45]]
    train = [p for n, p in enumerate(pairs, start=1) if n not in (23, 46)]
    return {"train": train, "validation": valid, "test": test}


def write_tgz(source: Path, archive: Path, skip: str = "") -> Path:
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(source.iterdir()):
            if path.name != skip:
                tar.add(path, arcname=f"de-en/{path.name}")
    return archive


@pytest.mark.parametrize("layout", ["de-en folder", "files directly", "tgz"])
def test_iwslt14_builds_fairseq_split(tmp_path, layout):
    if layout == "de-en folder":
        manual = tmp_path / "manual"
        expected = write_iwslt_files(manual / "de-en")
    elif layout == "files directly":
        manual = tmp_path / "manual"
        expected = write_iwslt_files(manual)
    else:
        expected = write_iwslt_files(tmp_path / "src" / "de-en")
        manual = write_tgz(tmp_path / "src" / "de-en", tmp_path / "manual" / "de-en.tgz").parent
    builder = build(Iwslt14, tmp_path / "tfds", manual)

    assert builder.name == "iwslt14"
    got = {s: [(ex["de"], ex["en"]) for ex in read(builder, s)] for s in expected}
    assert {s: len(v) for s, v in got.items()} == {"train": 47, "validation": 2, "test": 10}
    assert got == expected
    # Metadata lines are gone; title and description keep their text without tags.
    assert got["train"][0] == ("Vortrag 1: Größe", "Talk 1: size")
    assert got["train"][1] == ("Beschreibung 1 über Bäume", "Description 1 about trees")
    assert got["train"][2] == ("Satz 1: Grüße aus Köln", "Sentence 1: café & naïve")
    everything = "\n".join(de + "\n" + en for pairs in got.values() for de, en in pairs)
    for marker in ("<", ">", "http", "Sprecher", "Ann", "Bob", "talks, science", "metadata"):
        assert marker not in everything
    # Every 23rd remaining pair: numbers 23 and 46, i.e. sentences 21 and 42.
    assert got["validation"] == [("Satz 21: Grüße aus Köln", "Sentence 21: café & naïve"),
                                 ("Satz 42: Grüße aus Köln", "Sentence 42: café & naïve")]
    # Test split: the five sets in fairseq's order, blanks around <seg> text stripped.
    assert got["test"][0] == ("IWSLT14.TED.dev2010 0 Straße", "IWSLT14.TED.dev2010 0 street")
    assert got["test"][2] == ("IWSLT14.TEDX.dev2012 0 Straße", "IWSLT14.TEDX.dev2012 0 street")
    assert got["test"][-1] == ("IWSLT14.TED.tst2012 1 Straße", "IWSLT14.TED.tst2012 1 street")
    assert builder.info.supervised_keys == ("de", "en")


def test_iwslt14_helpers():
    assert iwslt14.clean_train_line("<talkid>7</talkid>") is None
    assert iwslt14.clean_train_line('<reviewer href="x">A</reviewer>') is None
    assert iwslt14.clean_train_line("<title>Hallo Welt</title>") == "Hallo Welt"
    assert iwslt14.clean_train_line(" Tom &amp; Jerry &#233;&#x10d; ") == "Tom & Jerry éč"
    assert iwslt14.clean_train_line("AT&T &para R&D") == "AT&T &para R&D"
    train, valid = iwslt14.split_train_valid(list(range(1, 70)))
    assert valid == [23, 46, 69]
    assert len(train) == 66 and 23 not in train and 22 in train and 24 in train


def test_iwslt14_missing_files_are_named(tmp_path):
    folder = tmp_path / "manual" / "de-en"
    write_iwslt_files(folder)
    (folder / "IWSLT14.TED.tst2011.de-en.en.xml").unlink()

    with pytest.raises(DataError) as err:
        build(Iwslt14, tmp_path / "tfds", tmp_path / "manual")
    message = str(err.value)
    assert "\n" not in message
    assert os.fspath(folder / "IWSLT14.TED.tst2011.de-en.en.xml") in message
    assert "train.tags" not in message


def test_iwslt14_incomplete_archive_is_named(tmp_path):
    write_iwslt_files(tmp_path / "src" / "de-en")
    archive = write_tgz(tmp_path / "src" / "de-en", tmp_path / "manual" / "de-en.tgz",
                        skip="train.tags.de-en.en")

    with pytest.raises(DataError) as err:
        build(Iwslt14, tmp_path / "tfds", archive.parent)
    assert os.fspath(archive) in str(err.value)
    assert "de-en/train.tags.de-en.en" in str(err.value)


# --------------------------------------------------------------------------- offline

OFFLINE = [(Multi30k, "TFNMT_MULTI30K_DIR"), (Iwslt14, "TFNMT_IWSLT14_DIR")]


@pytest.mark.parametrize("builder_cls,env_var", OFFLINE, ids=["multi30k", "iwslt14"])
def test_failed_download_says_how_to_use_a_local_copy(tmp_path, monkeypatch, builder_cls, env_var):
    calls = []

    def fail(self, urls):
        calls.append(urls)
        raise requests.exceptions.ConnectionError("Max retries exceeded\nName or service not known")

    monkeypatch.setattr(local_copy, "reachable", lambda host: True)
    monkeypatch.setattr(tfds.download.DownloadManager, "download", fail)

    with pytest.raises(DataError) as err:
        build(builder_cls, tmp_path / "tfds")
    message = str(err.value)
    assert calls, "the builder never tried to download"
    assert message.startswith("could not download ")
    assert "ConnectionError" in message and "no network?" in message
    assert f"--manual_dir=DIR (or set {env_var})" in message
    assert "\n" not in message


@pytest.mark.parametrize("builder_cls,env_var", OFFLINE, ids=["multi30k", "iwslt14"])
def test_unreachable_host_fails_fast(tmp_path, monkeypatch, builder_cls, env_var):
    # TFDS itself would retry for minutes; the builder must give up before downloading.
    monkeypatch.setattr(local_copy, "reachable", lambda host: False)

    start = time.monotonic()
    with pytest.raises(DataError) as err:
        build(builder_cls, tmp_path / "tfds")
    assert time.monotonic() - start < 10
    assert "cannot connect to" in str(err.value)
    assert f"--manual_dir=DIR (or set {env_var})" in str(err.value)


def test_probe_answers_at_once(monkeypatch):
    probe = REAL_PROBE
    with socket.socket() as s:  # a port that was free a moment ago is closed now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(urllib.request, "getproxies", dict)
    start = time.monotonic()
    assert probe("127.0.0.1", port=port, timeout=2) is False
    assert time.monotonic() - start < 3
    # Behind a proxy a direct connection says nothing, so the download is left to try.
    monkeypatch.setattr(urllib.request, "getproxies", lambda: {"https": "http://proxy:3128"})
    assert probe("127.0.0.1", port=port, timeout=2) is True
