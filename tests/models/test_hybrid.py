"""Hybrids are a config: `--model=hybrid` wires the encoder and the decoder its flags name."""

import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO, events, run_cli
from contract import assert_incremental_equals_teacher_forcing
from tfnmt.errors import ConfigError
from tfnmt.models import catalog

SOURCE = tf.constant([[5, 6, 7, 3, 0, 0], [8, 9, 3, 0, 0, 0]])
TARGET_IN = tf.constant([[2, 10, 11, 12, 13, 14], [2, 13, 14, 0, 0, 0]])
TRANSFORMER = dict(d_model=16, ffn_dim=32, num_heads=2)
DENSENMT = dict(embed_dim=16, residual_dim=12, growth_rate=8)


@pytest.mark.parametrize("encoder, decoder, sizes", [
    ("transformer", "densenmt", dict(TRANSFORMER, **DENSENMT)),
    ("transformer", "densenmt", dict(TRANSFORMER, **DENSENMT, decoder="residual", attention="none")),
    ("densenmt", "transformer", dict(TRANSFORMER, **DENSENMT, encoder="residual")),
    ("densenmt", "densenmt", dict(DENSENMT, attention="dense2", attention_dim=10, sumlen=2)),
    ("transformer", "transformer", dict(TRANSFORMER, pre_norm=True)),
])
def test_every_pair_decodes_incrementally_like_teacher_forcing(encoder, decoder, sizes):
    model = catalog.get("hybrid")(50, 60, encoder_type=encoder, decoder_type=decoder,
                                  encoder_layers=2, decoder_layers=2, dropout=0.0, **sizes)
    model.build_with_dummy_batch()
    assert_incremental_equals_teacher_forcing(model, SOURCE, TARGET_IN)
    # The parts' own layers, under the names the single-family models give them.
    names = {v.path.split("/")[1] for v in model.weights}
    assert {"encoder_layer_0", "encoder_conv_0"} & names and {"decoder_layer_0", "decoder_conv_0"} & names
    assert ("encoder_bridge" in names) == (encoder == "densenmt" and decoder == "transformer")


def test_a_hybrid_reads_only_the_flags_of_its_parts():
    hybrid = catalog.get("hybrid")
    with pytest.raises(ConfigError, match=r"^model 'hybrid' \(--encoder_type=transformer "
                       r"--decoder_type=transformer\) has no hyper-parameter growth_rate$"):
        hybrid(50, 60, encoder_type="transformer", decoder_type="transformer", growth_rate=8)
    with pytest.raises(ConfigError, match="^--decoder_type='lstm': choose one of conditional_gru, "
                       "densenmt, luong, recurrent, transformer$"):
        hybrid(50, 60, decoder_type="lstm")
    # A sentence encoder gives one vector: nothing to attend to.
    with pytest.raises(ConfigError, match="^--decoder_type=luong attends to the source's states, "
                       r"which --encoder_type=gru \(one vector per sentence\) does not give; "
                       "choose a decoder that reads a summary: conditional_gru$"):
        hybrid(50, 60, encoder_type="gru", decoder_type="luong")
    # DenseAtt reads the DenseNMT encoder's layers: with another encoder, multistep or none.
    with pytest.raises(ConfigError, match="^--attention='dense2': choose one of multistep, none$"):
        hybrid(50, 60, encoder_type="transformer", decoder_type="densenmt", attention="dense2")
    assert hybrid.with_defaults({"encoder_type": "transformer"})["attention"] == "multistep"
    assert hybrid.with_defaults({"encoder_type": "densenmt"})["attention"] == "dense2"


@pytest.mark.slow
def test_the_hybrid_config_trains_a_few_steps(corpus, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # the flagfile includes a shared recipe by its path from the root
    model_dir = str(tmp_path / "m")
    assert run_cli("train", "--flagfile=configs/hybrid/transformer-densenmt.cfg",
                   f"--model_dir={model_dir}", f"--data=text:{corpus}", "--vocab_size=60",
                   "--vocab_type=word", "--d_model=16", "--ffn_dim=32", "--embed_dim=16",
                   "--growth_rate=8", "--table_dim=0", "--encoder_layers=1", "--decoder_layers=2",
                   "--batch_tokens=256", "--train_steps=6",
                   "--warmup_steps=2", "--log_every=3", "--validate_every=6", "--save_every=6",
                   "--bleu_sentences=0", "--evaluate_at_end=false") == 0
    losses = [loss for _, loss in events(model_dir, "train/loss")]
    assert len(losses) == 2 and np.all(np.isfinite(losses))
    assert os.path.exists(os.path.join(model_dir, "ckpt", "ckpt-6.index"))


@pytest.mark.parametrize("encoder, decoder", [("transformer", "densenmt"), ("densenmt", "transformer")])
def test_a_transformer_part_refuses_heads_that_do_not_divide_its_width(encoder, decoder):
    with pytest.raises(ConfigError, match="--d_model=30 is not divisible by --num_heads=4"):
        catalog.get("hybrid")(50, 50, encoder_type=encoder, decoder_type=decoder,
                              **dict(TRANSFORMER, **DENSENMT, d_model=30, num_heads=4))
