"""Alignments (issue 17): attention carried by the beam search, the `alignments` signature,
`tfnmt translate --alignments=hard|soft [--plot_dir]`."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import run_cli
from contract import TINY, tiny_model
from tfnmt.data.vocab import BOS_ID, PAD_ID, load_vocabs
from tfnmt.decoding.alignments import Aligned, merge
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.translator import Translator
from tfnmt.errors import ConfigError
from tfnmt.exporters import saved_model
from tfnmt.serving.backends import from_checkpoint

SENTENCES = ["the big dog sees a red car", "house", "a small green bird runs"]
ALIGN = DecodingOptions(beam_size=4, alignments="soft")


@pytest.fixture(scope="module")
def aligner(trained_model):
    return from_checkpoint(trained_model, options=ALIGN)[1]


@pytest.mark.slow
def test_beam_attention_rows_sum_to_one_are_zero_on_padding_and_equal_teacher_forcing(
        aligner, corpus):
    # Enough sentences that some chosen hypotheses change beams on their way.
    with open(os.path.join(corpus, "test.en"), encoding="utf-8") as f:
        sentences = SENTENCES + f.read().splitlines()
    out = aligner.alignments_signature(tf.constant(sentences))
    source, lengths = aligner.tokenize(tf.constant(sentences))
    attention = out["attention"].numpy()  # [B, T, S]
    targets = out["target_tokens"].numpy()
    assert attention.shape[2] == source.shape[1]
    # The translation's ids, to teacher-force them.
    ids = [aligner.target_tokenizer.string_to_id(tf.constant([t for t in row if t], tf.string)).numpy()
           for row in targets]
    longest = max(len(row) for row in ids)
    padded = np.array([list(row) + [PAD_ID] * (longest - len(row)) for row in ids], np.int32)
    target_in = np.concatenate([np.full([len(ids), 1], BOS_ID, np.int32), padded[:, :-1]], 1)
    model = aligner.model
    model.decode(model.encode(source), tf.constant(target_in))
    forced = model.latest_attention().numpy()  # [B, T, S]
    # Two translations at least (the weak model ends some at once), one of several tokens.
    assert sum(len(row) > 0 for row in ids) >= 2 and max(len(row) for row in ids) > 2
    for b, row_ids in enumerate(ids):
        real_source = int(lengths[b]) + 1  # eos included
        t = len(row_ids)
        rows = attention[b, :t]
        np.testing.assert_allclose(rows[:, :real_source].sum(axis=1), 1.0, atol=1e-5)
        assert np.all(rows[:, real_source:] == 0.0)
        assert np.all(attention[b, t:] == 0.0)  # no rows after the translation
        np.testing.assert_allclose(rows, forced[b, :t], atol=1e-5)


@pytest.mark.slow
def test_exported_alignments_signature_equals_in_process_and_translate_writes_both_formats(
        trained_model, aligner, tmp_path):
    path = saved_model.export(aligner, str(tmp_path / "export"), "aligned", 1)
    loaded = saved_model.SavedModelTranslator(path)
    assert "alignments" in loaded.signatures()
    exported = loaded.translate_alignments(tf.constant(SENTENCES))
    expected = aligner.alignments_signature(tf.constant(SENTENCES))
    assert sorted(exported) == ["attention", "scores", "source_tokens", "target_tokens",
                                "translations"]
    for key in ("translations", "source_tokens", "target_tokens"):
        assert exported[key].numpy().tolist() == expected[key].numpy().tolist(), key
    np.testing.assert_allclose(exported["attention"].numpy(), expected["attention"].numpy(),
                               atol=1e-5)
    source_file = tmp_path / "in.txt"
    source_file.write_text("\n".join(SENTENCES + [""]) + "\n")
    outputs = {}
    for where in ([f"--model_dir={trained_model}", "--beam_size=4"], [f"--saved_model={path}"]):
        for mode in ("hard", "soft"):
            out = tmp_path / f"{mode}{len(outputs)}.txt"
            assert run_cli("translate", *where, f"--input={source_file}", f"--output={out}",
                           f"--alignments={mode}") == 0
            outputs.setdefault(mode, []).append(out.read_text().splitlines())
    for mode, (from_checkpoint_lines, from_export_lines) in outputs.items():
        assert from_checkpoint_lines == from_export_lines, mode
    translations = [t.decode() for t in expected["translations"].numpy()] + [""]
    for line, translation, sentence, soft in zip(outputs["hard"][0], translations,
                                                 SENTENCES + [""], outputs["soft"][0]):
        text, pairs = line.split("\t")
        assert text == translation
        record = json.loads(soft)
        assert record["translation"] == translation
        assert record["source"] == sentence.split()  # word vocabulary: a piece is a word
        assert len(record["attention"]) == len(record["target"])
        assert all(len(row) == len(record["source"]) for row in record["attention"])
        links = [tuple(map(int, pair.split("-"))) for pair in pairs.split()]
        # Each target word linked to its most attended source word.
        assert links == [(int(np.argmax(row)), j) for j, row in enumerate(record["attention"])]
        assert len(links) == len(translation.split())


def test_plot_dir_writes_one_png_per_input_line(trained_model, tmp_path):
    source_file = tmp_path / "in.txt"
    source_file.write_text("\n".join(SENTENCES) + "\n")
    plots = tmp_path / "plots"
    assert run_cli("translate", f"--model_dir={trained_model}", f"--input={source_file}",
                   f"--output={tmp_path / 'out.txt'}", "--alignments=soft",
                   f"--plot_dir={plots}") == 0
    names = sorted(os.listdir(plots))
    assert names == [f"{i}.png" for i in range(1, len(SENTENCES) + 1)]
    for name in names:
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_dir_needs_soft_alignments(trained_model, tmp_path, capsys):
    assert run_cli("translate", f"--model_dir={trained_model}", f"--plot_dir={tmp_path}") != 0
    assert "--plot_dir" in capsys.readouterr().err


def test_words_merge_pieces_sum_columns_and_average_rows():
    words, groups = merge(["\u2581new", "\u2581yo", "rk", "er"])
    assert words == ["new", "yorker"] and groups == [[0], [1, 2, 3]]
    item = Aligned("x", ["\u2581a", "\u2581b", "c", "</s>"], ["\u2581x", "y"],
                   np.array([[0.1, 0.2, 0.3, 0.4], [0.5, 0.1, 0.1, 0.3]], np.float32))
    source, target, matrix = item.words()
    assert source == ["a", "bc"] and target == ["xy"]
    np.testing.assert_allclose(matrix, [[0.3, 0.35]])
    assert item.hard() == "1-0"


@pytest.mark.slow
def test_every_model_returns_attention_or_refuses_in_one_line(trained_model):
    source_vocab, target_vocab = load_vocabs(trained_model)
    shapes, refused = {}, {}
    for name in sorted(TINY):
        keras.utils.set_random_seed(0)
        model = tiny_model(name, source_vocab.size, target_vocab.size)
        try:
            translator = Translator(model, source_vocab, target_vocab,
                                    DecodingOptions(beam_size=2, alignments="soft",
                                                    max_decode_length=6))
        except ConfigError as error:
            refused[name] = str(error)
            continue
        out = translator.alignments_signature(tf.constant(SENTENCES))
        source, lengths = translator.tokenize(tf.constant(SENTENCES))
        attention = out["attention"].numpy()
        shapes[name] = attention.shape
        assert attention.shape == (len(SENTENCES), out["target_tokens"].shape[1], source.shape[1])
        real = (out["target_tokens"].numpy() != b"")
        sums = attention.sum(axis=2)
        np.testing.assert_allclose(sums[real], 1.0, atol=1e-4, err_msg=name)
    assert set(refused) == {"conv_encoder", "gru_encdec", "ctc_nat"}, (refused, shapes)
    for name, message in refused.items():
        assert "\n" not in message and "--alignments" in message, message


@pytest.mark.slow
def test_alignments_refused_in_one_line_where_there_are_none(trained_model, tmp_path, capsys):
    source_file = tmp_path / "in.txt"
    source_file.write_text("a dog\n")
    base = str(tmp_path / "export")
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={base}",
                   "--export_name=plain") == 0
    capsys.readouterr()
    for flags, said in (([f"--saved_model={base}/plain/1"], "no `alignments` signature"),
                        ([f"--model_dir={trained_model}", "--sampling"], "not with --sampling"),
                        ([f"--model_dir={trained_model}", "--n_best=2"], "drop --n_best")):
        assert run_cli("translate", *flags, f"--input={source_file}",
                       "--alignments=hard") != 0, flags
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("tfnmt translate: error: --alignments"), err
        assert said in err[0], err
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={base}",
                   "--format=tflite", "--alignments=soft") != 0
    assert "--alignments applies to SavedModel exports" in capsys.readouterr().err
