"""The CTC non-autoregressive model (ctc_nat): its variants, labelling, loss and training, and a
Multi30k slice exported. The state splitter alone: tests/layers/test_state_splitter.py; its
decoder: tests/decoders/test_ctc_decoder.py; CTC search: tests/decoding/test_ctc.py; the CTC
loss: tests/objectives/test_ctc_loss.py."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import events, multi30k_lines, run_cli
from contract import overfit_export_and_compare
from helpers.ctc import SOURCE, make
from tfnmt.errors import ConfigError
from tfnmt.models import catalog


@pytest.mark.parametrize("variant", ["deep_encoder", "encoder_decoder", "encoder_decoder_pos"])
def test_every_variant_labels_k_times_the_source_length_over_vocabulary_plus_blank(variant):
    model = make(variant, split_factor=3)
    outputs = model({"source": SOURCE, "target_in": tf.constant([[2, 10]] * 2)})
    assert outputs["logits"].shape == (2, 15, 61) and model.blank_id == 60
    np.testing.assert_array_equal(outputs["lengths"].numpy(), [12, 9])
    # Padding the source changes no real label.
    longer = model({"source": tf.pad(SOURCE, [[0, 0], [0, 3]]), "target_in": tf.constant([[2]] * 2)})
    np.testing.assert_allclose(longer["logits"][1, :9].numpy(), outputs["logits"][1, :9].numpy(), atol=1e-5)
    paths = [v.path for v in model.weights]
    assert len(set(paths)) == len(paths) and all(p.startswith("ctc_nat/") for p in paths)
    assert any("decoder_layer" in p for p in paths) == (variant != "deep_encoder")


def test_model_loss_drops_the_eos_and_counts_impossible_pairs():
    model = make(split_factor=1)
    outputs = model({"source": SOURCE, "target_in": tf.constant([[2]] * 2)})
    # Row 1 has 4 frames for 3 labels (eos is not one); row 2 has 3 frames for 4 labels.
    labels = tf.constant([[10, 11, 12, 3, 0], [10, 11, 12, 13, 3]])
    loss, tokens = model.translation_loss(labels, outputs)
    assert tokens.numpy() == 3 and np.isfinite(loss.numpy())
    assert model._reports["total/dropped_pairs"].numpy() == 1


@pytest.mark.slow
def test_training_logs_the_dropped_pairs_and_never_sees_an_infinite_loss(ctc_trained_model):
    # k = 1 on reversed word-for-word pairs: a target with equal neighbours cannot be aligned.
    # (ctc_trained_model, tests/conftest.py: 20 steps, --ctc_variant=encoder_decoder,
    # --split_factor=1; tests/cli/test_score.py shares it.)
    model_dir = ctc_trained_model
    dropped = events(model_dir, "train/dropped_pairs")
    assert [s for s, _ in dropped] == [10, 20] and sum(v for _, v in dropped) > 0
    assert all(np.isfinite(v) for _, v in events(model_dir, "train/loss"))


@pytest.mark.parametrize("bad, message", [
    (dict(ctc_variant="decoder_only"), "--ctc_variant='decoder_only'"),
    (dict(ctc_variant="deep_encoder"), "set --decoder_layers=0"),
    (dict(ctc_variant="encoder_decoder", decoder_layers=0), "needs --decoder_layers >= 1"),
    (dict(split_factor=0), "--split_factor=0: model 'ctc_nat' needs an integer >= 1"),
])
def test_bad_settings_are_config_errors(bad, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        catalog.get("ctc_nat")(50, 60, **bad)


# --- trained on a Multi30k slice: export, TFLite, decode benchmark --------------------------------
CTC_SMALL = ["--model=ctc_nat", "--encoder_layers=1", "--decoder_layers=1", "--d_model=64",
             "--ffn_dim=128", "--num_heads=4", "--pre_norm"]


@pytest.fixture(scope="module")
def ctc_model(multi30k_dir, tmp_path_factory):
    """Trained, exported, and the checkpoint's greedy and beam translations of 12 training
    sentences and an empty line compared with the SavedModel's default and beam signatures.
    The loss falls from 6.4 to 0.03 over steps 181-240 (1.0 over steps 121-180); with a
    learning rate of 1e-12 it stays near 14.5."""
    run = overfit_export_and_compare(
        str(tmp_path_factory.mktemp("ctc")), multi30k_dir, *CTC_SMALL, steps=240,
        learning_rate=3e-3, below=2.0, extra_sources=[""],
        compare=((("--beam_size=1",), ()), (("--beam_size=3",), ("--signature=beam",))))
    return run.model_dir, run, run.saved_model


@pytest.mark.slow
def test_tiny_ctc_model_overfits_multi30k_and_its_saved_model_matches_in_process(
        ctc_model, multi30k_dir, capsys):
    _, run, export = ctc_model
    with open(os.path.join(export, "assets.extra", "tfnmt_export.json")) as f:
        assert json.load(f)["signatures"] == {"serving_default": {"beam_size": 1},
                                              "beam": {"beam_size": 3}}
    lines = run.outputs[0]
    assert len(lines) == 13 and lines[12] == ""
    from tfnmt.evaluation import bleu
    assert bleu.score(lines[:12], multi30k_lines(multi30k_dir, "de", 12))["bleu"] > 30
    assert run_cli("translate", f"--saved_model={export}", "--signature=nbest") == 2
    assert "has no signature 'nbest'; it has beam, serving_default" in capsys.readouterr().err


@pytest.mark.slow
def test_decode_bench_compares_every_signature_of_several_exports(ctc_model, trained_model,
                                                                  multi30k_dir, tmp_path, capsys):
    _, _, ctc_export = ctc_model
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={tmp_path}",
                   "--beam_size=2", "--export_name=ar") == 0
    ar_export = str(tmp_path / "ar" / "1")
    capsys.readouterr()
    assert run_cli("bench", "--bench=decode", f"--saved_model={ar_export},{ctc_export}",
                   "--bench_sentences=40", "--bench_latency_sentences=5", "--decode_batch_size=16",
                   f"--data=text:{multi30k_dir}", "--test_split=test_2016_flickr") == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["bench"] == "decode" and result["sentences"] == 40
    assert result["baseline"] == f"{ar_export}:serving_default"
    rows = [(r["saved_model"], r["signature"], r["model"], r["beam_size"]) for r in result["results"]]
    assert rows == [(ar_export, "serving_default", "transformer", 2),
                    (ctc_export, "serving_default", "ctc_nat", 1), (ctc_export, "beam", "ctc_nat", 3)]
    first = result["results"][0]
    assert first["throughput_speedup"] == 1.0 and first["latency_speedup"] == 1.0
    for row in result["results"]:
        assert row["sentences_per_second"] > 0 and row["batch1_latency_ms_p50"] > 0
        assert row["throughput_speedup"] == pytest.approx(
            row["sentences_per_second"] / first["sentences_per_second"], abs=0.01)
