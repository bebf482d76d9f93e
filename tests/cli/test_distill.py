"""tfnmt distill: a teacher's translations of the training sources as a text:DIR corpus."""

import json
import os

import pytest

from conftest import run_cli
from tfnmt.cli import distill
from tfnmt.data import sources


def lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


@pytest.fixture(scope="module")
def distilled(trained_model, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("distilled"))
    assert run_cli("distill", f"--model_dir={trained_model}", f"--output_dir={out}",
                   "--beam_size=2", "--decode_batch_size=64") == 0
    return out


@pytest.mark.slow
def test_corpus_holds_the_teachers_translations_and_the_original_held_out_splits(
        trained_model, corpus, distilled, tmp_path, capsys):
    out = distilled
    assert sorted(os.listdir(out)) == ["distill.json", "test.de", "test.en", "train.de", "train.en",
                                       "valid.de", "valid.en"]
    source = tmp_path / "train.en"
    source.write_text("\n".join(lines(os.path.join(out, "train.en"))) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert run_cli("translate", f"--model_dir={trained_model}", f"--input={source}",
                   "--beam_size=2", "--decode_batch_size=64") == 0
    assert capsys.readouterr().out.splitlines() == lines(os.path.join(out, "train.de"))
    info = json.load(open(os.path.join(out, "distill.json")))
    assert info["sentences"] == 600 and info["beam_size"] == 2
    assert info["train_pairs"] + info["empty_translations"] == 600
    # The kept sources are the corpus's, in order (a pair with an empty translation is left out).
    kept, original = lines(os.path.join(out, "train.en")), iter(lines(os.path.join(corpus, "train.en")))
    assert len(kept) == info["train_pairs"] and all(s in original for s in kept)
    for split in ("valid", "test"):
        for lang in ("en", "de"):
            assert lines(os.path.join(out, f"{split}.{lang}")) == lines(os.path.join(corpus, f"{split}.{lang}"))
    spec = sources.DataSpec(f"text:{out}", "en", "de")
    assert len(list(sources.pairs(spec, "train").as_numpy_iterator())) == info["train_pairs"]


@pytest.mark.slow
def test_an_interrupted_run_continues_after_its_last_whole_chunk(trained_model, corpus, distilled,
                                                                 tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(distill, "CHUNK", 250)
    real = distill._chunks

    def interrupted_after_two(results, count):
        for number, chunk in enumerate(real(results, count)):
            if number == 2:
                raise KeyboardInterrupt
            yield chunk
    monkeypatch.setattr(distill, "_chunks", interrupted_after_two)
    out = str(tmp_path / "d")
    # A source over 6 words is cut, and named by its line of the training split.
    flags = [f"--model_dir={trained_model}", f"--output_dir={out}", "--beam_size=2",
             "--decode_batch_size=64", "--max_input_length=6"]
    assert run_cli("distill", *flags) == 130
    first = lines(os.path.join(out, "train.de.partial"))
    assert len(first) == 500
    chunks = []

    def recording(results, count):
        for chunk in real(results, count):
            chunks.append(chunk)
            yield chunk
    monkeypatch.setattr(distill, "_chunks", recording)
    caplog.clear()
    assert run_cli("distill", *flags) == 0
    assert [len(c) for c in chunks] == [100]  # only the sentences after the two finished chunks
    info = json.load(open(os.path.join(out, "distill.json")))
    expected = [t for t in first + chunks[0] if t.strip()]
    assert lines(os.path.join(out, "train.de")) == expected and info["train_pairs"] == len(expected)
    assert not any(n.endswith((".partial", ".partial.json")) for n in os.listdir(out))
    train = lines(os.path.join(corpus, "train.en"))
    long = [number for number, sentence in enumerate(train, start=1)
            if number > 500 and len(sentence.split()) > 6]
    named = [r.getMessage() for r in caplog.records if "max_input_length" in r.getMessage()]
    assert long and named == [f"{info['data']} train:{number}: 7 subwords; only the first 6 are "
                              "translated (--max_input_length)" for number in long]


@pytest.mark.slow
def test_distill_prints_progress_lines_into_a_log(trained_model, tmp_path, monkeypatch, caplog):
    from tfnmt import progress
    from tfnmt.cli import console
    monkeypatch.setattr(console, "_stderr_is_terminal", False)
    monkeypatch.setattr(progress, "EVERY", 0)  # a line at every batch
    caplog.set_level("INFO")
    assert run_cli("distill", f"--model_dir={trained_model}", f"--output_dir={tmp_path / 'd'}",
                   "--train_limit=40", "--beam_size=1", "--decode_batch_size=16") == 0
    assert "distill: 16/40 sent (40%)  " in caplog.text
    assert "distill: 40/40 sent (100%)  in " in caplog.text


def test_output_dir_is_required(trained_model, capsys):
    assert run_cli("distill", f"--model_dir={trained_model}") == 2
    assert "--output_dir is required" in capsys.readouterr().err
