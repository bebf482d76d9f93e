"""Convolutional sentence encoders into a GRU decoder and the GRU encoder-decoder baseline
(models conv_encoder, gru_encdec): the parts' configs, bad choices, training and export. The
encoders: tests/encoders/test_conv_sentence.py, test_gru.py; the decoder:
tests/decoders/test_conditional_gru.py. Gated pooling alone: tests/layers/test_gated_pooling.py;
chunking: tests/decoding/test_chunking.py; the training length limit:
tests/training/test_source_length_limit.py."""

import logging
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from conftest import multi30k_lines, run_cli
from contract import overfit_export_and_compare
from helpers.sentence_models import conv_model
from tfnmt.data.vocab import PAD_ID
from tfnmt.decoding import chunking
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.batches import translate_sentences
from tfnmt.errors import ConfigError
from tfnmt.exporters import tflite
from tfnmt.models import catalog


@pytest.mark.parametrize("kind", ["ngram_widths", "small_filters_gated"])
def test_encoder_and_decoder_layers_round_trip_their_config(kind):
    from tfnmt.layers.conditional_gru_decoder import ConditionalGRUDecoder
    from tfnmt.layers.conv_sentence_encoder import ConvSentenceEncoder
    model = conv_model(kind)
    rows = tf.random.stateless_normal([2, 32, 8], seed=[0, 1])
    encoder = ConvSentenceEncoder.from_config(model.encoder.sentence.get_config())
    encoder.build(rows.shape)
    encoder(rows)
    encoder.set_weights(model.encoder.sentence.get_weights())
    np.testing.assert_allclose(encoder(rows).numpy(), model.encoder.sentence(rows).numpy(), atol=1e-6)
    decoder = ConditionalGRUDecoder.from_config(model.decoder.gru.get_config())
    y, c = tf.random.stateless_normal([2, 5, 8], seed=[2, 3]), tf.random.stateless_normal([2, 10], seed=[4, 5])
    decoder.build((y.shape, c.shape))
    decoder.set_weights(model.decoder.gru.get_weights())
    np.testing.assert_allclose(decoder((y, c)).numpy(), model.decoder.gru((y, c)).numpy(), atol=1e-6)


def test_bad_choices_are_config_errors():
    conv = catalog.get("conv_encoder")
    with pytest.raises(ConfigError, match="--conv_encoder='resnet'"):
        conv(50, 60, conv_encoder="resnet")
    with pytest.raises(ConfigError, match="--ngram_widths='2,x'"):
        conv(50, 60, ngram_widths="2,x")
    with pytest.raises(ConfigError, match="--ngram_widths applies"):
        conv(50, 60, conv_encoder="small_filters", ngram_widths="3")
    with pytest.raises(ConfigError, match="--small_filter_size applies"):
        conv(50, 60, conv_encoder="ngram", small_filter_size="5x5")
    with pytest.raises(ConfigError, match="--small_filter_size='5'"):
        conv(50, 60, conv_encoder="small_filters", small_filter_size="5")
    with pytest.raises(ConfigError, match="ngram_1layer has one layer"):
        conv(50, 60, conv_encoder="ngram_1layer", conv_layers=3)
    with pytest.raises(ConfigError, match="halve the sentence matrix"):
        conv(50, 60, conv_encoder="ngram", conv_layers=6)
    with pytest.raises(ConfigError, match="--dropout"):
        catalog.get("gru_encdec")(50, 60, dropout=1.0)
    with pytest.raises(ConfigError, match="no hyper-parameter source_window"):
        catalog.get("gru_encdec")(50, 60, source_window=32)


# --- training, export --------------------------------------------------------------------------

TINY_FLAGS = {
    "conv_encoder": ["--model=conv_encoder", "--conv_encoder=ngram", "--conv_layers=2",
                     "--conv_filters=64", "--conv_input_dim=64", "--ngram_widths=2,3",
                     "--gated_pooling=true", "--embed_dim=64", "--encoding_dim=128",
                     "--hidden_dim=128", "--maxout_dim=96"],
    "gru_encdec": ["--model=gru_encdec", "--embed_dim=64", "--hidden_dim=128", "--maxout_dim=128"],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TINY_FLAGS))
def test_tiny_model_overfits_multi30k_and_its_export_matches_in_process(name, multi30k_dir,
                                                                      tmp_path, capsys, caplog):
    lines = multi30k_lines(multi30k_dir, "en", 12)
    long = " ".join(multi30k_lines(multi30k_dir, "en", 6, start=20))  # about 90 subwords
    # From about 6 nats/token to 0.20 (conv_encoder) and 0.45 (gru_encdec) over steps 61-80; at
    # a learning rate of 1e-12 the loss stays near 6.
    with caplog.at_level(logging.INFO):
        run = overfit_export_and_compare(str(tmp_path), multi30k_dir, *TINY_FLAGS[name], steps=80,
                                         learning_rate=1e-2, below=1.5, extra_sources=[long])
    model_dir, sources = run.model_dir, run.sources
    export_dir = pathlib.Path(run.saved_model).parents[1]
    if name != "conv_encoder":
        return
    reported = [r.getMessage() for r in caplog.records if "translated in chunks" in r.getMessage()]
    assert len(reported) == 1 and reported[0].endswith(", 13"), reported
    # The long line's translation is its chunks' translations joined, and every chunk adds words.
    from tfnmt.cli.common import load_translator
    from tfnmt.cli.options import ModelDirOptions
    _, translator = load_translator(ModelDirOptions(model_dir=str(model_dir)),
                                    DecodingOptions(beam_size=3))
    source, lengths = translator.tokenize(tf.constant([long]))
    assert lengths.numpy()[0] > 62  # at least three chunks
    chunks, chunk_lengths, _ = chunking.split(source, lengths, 32)
    pieces = [translator.search(chunks[i:i + 1], chunk_lengths[i:i + 1])[0][0, 0].numpy()
              for i in range(chunks.shape[0])]
    assert all((p != PAD_ID).sum() >= 3 for p in pieces)
    joined = np.concatenate([p[p != PAD_ID] for p in pieces])
    whole = translator.translate_ids(source, lengths)[0][0].numpy()
    assert whole[whole != PAD_ID].tolist() == joined.tolist()
    # The TFLite flatbuffer chunks inside too (dense ops only) and gives the same text.
    assert run_cli("export", f"--model_dir={model_dir}", f"--export_dir={export_dir}",
                   "--format=tflite", "--beam_size=3", "--export_name=lite") == 0
    lite = tflite.TFLiteTranslator(str(export_dir / "lite" / "1"))
    assert translate_sentences(lite, lines + [long], batch_size=4) == run.outputs[0]
    # --long_input=error refuses the long line with one line and exit status 2, in-process and
    # from an export made with it.
    capsys.readouterr()
    assert run_cli("translate", f"--model_dir={model_dir}", f"--input={sources}",
                   "--long_input=error") == 2
    first_long = reported[0].split("line(s) ")[1].split(",")[0]
    assert f"tfnmt translate: error: {sources}:{first_long}: " in capsys.readouterr().err
    assert run_cli("export", f"--model_dir={model_dir}", f"--export_dir={export_dir}",
                   "--long_input=error", "--export_name=overfit", "--export_version=2") == 0
    capsys.readouterr()
    assert run_cli("translate", f"--saved_model={export_dir / 'overfit' / '2'}",
                   f"--input={sources}") == 2
    err = capsys.readouterr().err
    assert "longer than the source window of the model" in err and "Traceback" not in err


@pytest.mark.slow
def test_multi30k_configs_compare_the_encoders_at_a_similar_size(monkeypatch, capsys):
    from conftest import REPO
    monkeypatch.chdir(REPO)  # the flagfiles include their recipe by a path from the root
    totals = {}
    for name in ("gru-encdec", "small-filters", "ngram-1layer", "ngram", "ngram-gated",
                 "ngram-widths"):
        assert run_cli("info", f"--flagfile=configs/conv_encoder/multi30k/{name}.cfg") == 0
        out = capsys.readouterr().out
        totals[name] = int(out.split("total")[1].split()[0].replace(",", ""))
    assert max(totals.values()) / min(totals.values()) < 1.03, totals
