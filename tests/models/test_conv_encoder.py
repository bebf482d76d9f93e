"""Convolutional sentence encoders into a GRU decoder and the GRU encoder-decoder baseline
(models conv_encoder, gru_encdec). Gated pooling alone: tests/layers/test_gated_pooling.py;
chunking: tests/decoding/test_chunking.py; the training length limit:
tests/training/test_source_length_limit.py."""

import logging
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from conftest import multi30k_lines, run_cli
from contract import assert_incremental_equals_teacher_forcing, overfit_export_and_compare
from tfnmt.data.vocab import EOS_ID, PAD_ID
from tfnmt.decoding import chunking
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.batches import translate_sentences
from tfnmt.errors import ConfigError
from tfnmt.exporters import tflite
from tfnmt.models import catalog

SOURCE = tf.constant([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]])
TARGET_IN = tf.constant([[2, 10, 11, 12, 13, 14], [2, 13, 14, 0, 0, 0]])
DECODER = dict(embed_dim=8, hidden_dim=12, maxout_dim=6, dropout=0.0)
TINY = {
    "small_filters": dict(conv_encoder="small_filters", conv_filters=3, encoding_dim=10, **DECODER),
    "ngram_1layer": dict(conv_encoder="ngram_1layer", conv_filters=5, conv_input_dim=16,
                         encoding_dim=10, **DECODER),
    "ngram": dict(conv_encoder="ngram", conv_filters=5, conv_input_dim=16, encoding_dim=10, **DECODER),
    "ngram_gated": dict(conv_encoder="ngram", conv_filters=5, conv_input_dim=16, encoding_dim=10,
                        gated_pooling=True, **DECODER),
    "small_filters_gated": dict(conv_encoder="small_filters", conv_filters=3, encoding_dim=10,
                                gated_pooling=True, **DECODER),
    "ngram_widths": dict(conv_encoder="ngram", conv_filters=5, conv_input_dim=16, encoding_dim=10,
                         ngram_widths="2,3,5", **DECODER),
}


def conv_model(kind, **overrides):
    model = catalog.get("conv_encoder")(50, 60, **dict(TINY[kind], **overrides))
    model.label_smoothing = 0.1
    model.build_with_dummy_batch()
    return model


def gru_model(**overrides):
    model = catalog.get("gru_encdec")(50, 60, **dict(DECODER, **overrides))
    model.build_with_dummy_batch()
    return model


def random_weights(model, seed=0, scale=0.3):
    rng = np.random.default_rng(seed)
    for w in model.weights:
        if w.trainable:
            w.assign(rng.normal(0, scale, w.shape).astype(np.float32))


# --- encoders ----------------------------------------------------------------------------------

# The report's sizes at k̄ = 32: h_m per sentence, and the first convolution's kernel.
REPORT_SHAPES = [
    (dict(conv_encoder="small_filters"), (12, 4, 32), (3, 3, 1, 32)),  # 100x32 image, 3 pools
    (dict(conv_encoder="ngram_1layer"), (16, 100), (2, 1000, 100)),
    (dict(conv_encoder="ngram"), (4, 500), (2, 1000, 500)),
    (dict(conv_encoder="ngram", gated_pooling=True), (4, 500), (2, 1000, 500)),
    (dict(conv_encoder="ngram", ngram_widths="2,3"), (4, 1000), (2, 1000, 500)),
]


@pytest.mark.parametrize("flags,features,kernel", REPORT_SHAPES,
                         ids=["small_filters", "ngram_1layer", "ngram", "gated", "widths"])
def test_each_encoder_variant_at_the_reports_sizes(flags, features, kernel):
    model = catalog.get("conv_encoder")(40, 40, **flags)
    model.build_with_dummy_batch()
    assert model.source_window == 32
    assert model.encoder.sentence.feature_shape() == features
    assert tuple(model.encoder.sentence.convolutions[0][0].kernel.shape) == kernel
    source = tf.constant([[5] * 31 + [3], [6, 7, 3] + [0] * 29, [8, 3] + [0] * 30])
    encoding = model.encode(source)["encoding"]
    assert encoding.shape == (3, 1000)
    assert model.encoder.sentence.projection.kernel.shape == (int(np.prod(features)), 1000)
    if flags["conv_encoder"] != "small_filters":  # 100-d embeddings up-projected to d = 1000
        assert model.encoder.sentence.upprojection.kernel.shape == (100, 1000)
    assert np.isfinite(encoding.numpy()).all()


def test_gru_baseline_has_the_reports_sizes():
    model = catalog.get("gru_encdec")(40, 40)
    model.build_with_dummy_batch()
    assert model.source_window is None
    assert model.encode(SOURCE)["encoding"].shape == (2, 1000)
    assert model.encoder.gru.cell.kernel.shape == (100, 3000)


ENCODERS = sorted(TINY) + ["gru_encdec"]


def make(kind):
    return gru_model() if kind == "gru_encdec" else conv_model(kind)


@pytest.mark.parametrize("kind", ENCODERS)
def test_the_encoding_does_not_change_when_padding_is_added(kind):
    model = make(kind)
    random_weights(model)  # gated pooling starts as average pooling; make it gate
    alone = model.encode(tf.constant([[9, 10, 11, 3]]))["encoding"].numpy()
    assert np.abs(alone).max() > 1e-3
    for source in ([[9, 10, 11, 3, 0, 0, 0]],
                   [[9, 10, 11, 3, 0, 0, 0], [5, 6, 7, 8, 9, 10, 3]],
                   [[9, 10, 11, 3] + [0] * 36]):  # batch padding past the window of 32
        padded = model.encode(tf.constant(source))["encoding"].numpy()
        np.testing.assert_allclose(padded[0], alone[0], atol=1e-5)
    other = model.encode(tf.constant([[9, 10, 12, 3]]))["encoding"].numpy()
    assert np.abs(other - alone).max() > 1e-4


@pytest.mark.parametrize("kind", sorted(TINY))
def test_every_position_of_the_window_reaches_the_encoding(kind):
    model = conv_model(kind)
    random_weights(model, seed=1)
    for conv in model.encoder.sentence.convolutions:  # no unit dead from the start
        for layer in conv:
            layer.bias.assign(tf.ones_like(layer.bias))
    source = np.full([1, 32], 5, np.int32)
    source[0, -1] = EOS_ID
    base = model.encode(tf.constant(source))["encoding"].numpy()
    for position in (0, 15, 30):
        changed = source.copy()
        changed[0, position] = 17
        assert np.abs(model.encode(tf.constant(changed))["encoding"].numpy() - base).max() > 1e-5


def test_a_source_longer_than_the_window_is_refused_not_cut():
    model = conv_model("ngram")
    with pytest.raises(tf.errors.InvalidArgumentError, match="longer than --source_window=32"):
        model.encode(tf.constant([[5] * 40 + [3]]))


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


@pytest.mark.parametrize("kind", ["ngram_gated", "small_filters_gated"])
def test_gated_pooling_weights_are_learned(kind):
    model = conv_model(kind)
    target_out = tf.concat([TARGET_IN[:, 1:], tf.fill([2, 1], EOS_ID)], axis=1)
    gates = [w for w in model.trainable_weights if "gated_pool" in w.path]
    assert len(gates) == 2 * 3  # scale and position bias of each of the 3 layers
    with tf.GradientTape() as tape:
        logits = model({"source": SOURCE, "target_in": TARGET_IN}, training=True)
        loss, _ = model.translation_loss(target_out, logits)
    for weight, gradient in zip(gates, tape.gradient(loss, gates)):
        assert gradient is not None and np.abs(gradient.numpy()).max() > 0, weight.path


# The encoders in numpy (paper 004, sec. 4 and 5.2-5.4), from the token ids: the embeddings are
# the columns of a d x k̄ matrix whose columns after the sentence are zero; each layer is
# pooling(ReLU(conv + b)); h_f = W_f h_m + b_f.

def relu(x):
    return np.maximum(x, 0.0)


def ngram_conv(x, kernel, bias):
    """[B, T, d] -> [B, T, F]: d x n filters, n - 1 zero columns appended after the sentence."""
    n = kernel.shape[0]
    padded = np.pad(x, [(0, 0), (0, n - 1), (0, 0)])
    return sum(padded[:, j:j + x.shape[1]] @ kernel[j] for j in range(n)) + bias


def small_conv(image, kernel, bias):
    """[B, H, W, C] -> [B, H, W, F]: a 2-D convolution keeping the size, zeros around."""
    kh, kw = kernel.shape[:2]
    padded = np.pad(image, [(0, 0), ((kh - 1) // 2, kh // 2), ((kw - 1) // 2, kw // 2), (0, 0)])
    h, w = image.shape[1:3]
    return sum(padded[:, a:a + h, b:b + w] @ kernel[a, b] for a in range(kh) for b in range(kw)) + bias


def windows(x, size):
    """Non-overlapping pooling windows, a trailing remainder dropped: [..., p (* q), C]."""
    if len(size) == 1:
        (p,) = size
        t = x.shape[1] // p
        return x[:, :t * p].reshape(x.shape[0], t, p, x.shape[-1])
    p, q = size
    h, w = x.shape[1] // p, x.shape[2] // q
    blocks = x[:, :h * p, :w * q].reshape(x.shape[0], h, p, w, q, x.shape[-1])
    return blocks.transpose(0, 1, 3, 2, 4, 5).reshape(x.shape[0], h, w, p * q, x.shape[-1])


def reference_encoding(model, source):
    encoder, window = model.encoder.sentence, model.source_window
    table = model.encoder.embedding.embeddings.numpy().astype(np.float64)
    rows = np.zeros([len(source), window, table.shape[1]])
    for b, ids in enumerate(source):
        real = [i for i in ids if i != PAD_ID]
        rows[b, :len(real)] = table[real]  # zero columns after the sentence
    if encoder.upprojection is not None:  # linear, no bias: zero columns stay zero
        rows = rows @ encoder.upprojection.kernel.numpy()
    gated = encoder.gated_pooling
    if encoder.variant == "small_filters":
        x, size = rows.transpose(0, 2, 1)[..., None], (2, 2)  # the d x k̄ image, one channel
    else:
        x, size = rows, (2,)
    for convolutions, pooling in zip(encoder.convolutions, encoder.poolings):
        conv = small_conv if encoder.variant == "small_filters" else ngram_conv
        # Several n-gram widths: each its own filters, outputs concatenated in --ngram_widths order.
        x = np.concatenate([relu(conv(x, c.kernel.numpy(), c.bias.numpy())) for c in convolutions],
                           axis=-1)
        pieces = windows(x, size)
        if gated:
            scores = pieces * pooling.scale.numpy() + pooling.position_bias.numpy()
            weights = np.exp(scores - scores.max(axis=-2, keepdims=True))
            x = (weights / weights.sum(axis=-2, keepdims=True) * pieces).sum(axis=-2)
        elif encoder.variant == "small_filters":
            x = pieces.mean(axis=-2)  # 2x2 average pooling, stride 2 (sec. 5.2)
        else:
            x = pieces.max(axis=-2)  # max pooling of width 2, stride 2 over time (sec. 5.4)
    h_m = x.reshape(len(source), -1)
    return h_m @ encoder.projection.kernel.numpy() + encoder.projection.bias.numpy()


REFERENCE_CASES = dict(
    {kind: {} for kind in TINY},
    # Odd sizes: trailing rows / columns / positions dropped by the pooling, an up-projection
    # before the small filters, a non-square filter.
    small_filters_odd=dict(conv_input_dim=9, source_window=13, small_filter_size="5x3"),
    ngram_odd=dict(source_window=11, ngram_widths="3,2"),
)


@pytest.mark.parametrize("case", sorted(REFERENCE_CASES))
def test_each_encoder_variant_equals_a_numpy_reference(case):
    kind = case.replace("_odd", "")
    model = conv_model(kind, **REFERENCE_CASES[case])
    random_weights(model, seed=4)  # every weight, the gates' and biases' included
    for convolutions in model.encoder.sentence.convolutions:  # few units dead from the start
        for conv in convolutions:
            conv.bias.assign(np.abs(conv.bias.numpy()) + 0.2)
    window = model.source_window
    source = np.zeros([3, window], np.int32)
    source[0, :window - 1], source[0, -1] = np.arange(5, 5 + window - 1) % 45 + 5, EOS_ID  # full
    source[1, :4] = [9, 10, 11, EOS_ID]
    source[2, :2] = [12, EOS_ID]
    expected = reference_encoding(model, source.tolist())
    encoding = model.encode(tf.constant(source))["encoding"].numpy()
    atol = 1e-5 * np.abs(expected).max()
    # The sentences' encodings differ by far more than the tolerance (the small filters' averages
    # the least: by 1e-2).
    pairs = ((0, 1), (0, 2), (1, 2))
    assert min(np.abs(expected[a] - expected[b]).max() for a, b in pairs) > 100 * atol
    np.testing.assert_allclose(encoding, expected, rtol=1e-4, atol=atol)
    # A batch narrower than the window is zero-filled after the sentences to k̄ columns.
    narrow = model.encode(tf.constant(source[1:, :4]))["encoding"].numpy()
    np.testing.assert_allclose(narrow, expected[1:], rtol=1e-4, atol=atol)


# --- decoder -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ENCODERS)
def test_incremental_decoding_equals_teacher_forcing(kind):
    model = make(kind)
    state = assert_incremental_equals_teacher_forcing(model, SOURCE, TARGET_IN, atol=1e-5)
    # The state after decoding is the teacher-forced GRU's last state (keras.layers.RNN over the
    # whole target, not the stepped cell).
    encoding = model.encode(SOURCE)["encoding"]
    y = model.decoder.embedding(TARGET_IN)
    c = tf.broadcast_to(encoding[:, None], [2, TARGET_IN.shape[1], encoding.shape[-1]])
    states = model.decoder.gru.rnn(tf.concat([y, c], axis=-1),
                                   initial_state=[model.decoder.gru.initial_state(encoding)])
    np.testing.assert_allclose(state["state"].numpy(), states[:, -1].numpy(), atol=1e-5)
    paths = [v.path for v in model.weights]
    assert len(set(paths)) == len(paths) and all(p.startswith(f"{model.name}/") for p in paths)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_gru(x, h, kernel, recurrent_kernel, bias):
    """Cho et al.'s GRU (main text eq. 5-8) on Keras GRU(reset_after=False) weights."""
    Wz, Wr, Wh = np.split(kernel, 3, axis=1)
    Uz, Ur, Uh = np.split(recurrent_kernel, 3, axis=1)
    bz, br, bh = np.split(bias, 3)
    z = sigmoid(x @ Wz + h @ Uz + bz)
    r = sigmoid(x @ Wr + h @ Ur + br)
    return z * h + (1 - z) * np.tanh(x @ Wh + (r * h) @ Uh + bh)


def test_gru_baseline_encoding_is_tanh_v_of_the_last_encoder_state():
    model = gru_model()
    random_weights(model, seed=3)
    source = tf.constant([[5, 6, 7, 3, 0]])
    x = model.encoder.embedding(source).numpy()[0]
    cell = model.encoder.gru.cell
    h = np.zeros((1, 12), np.float32)
    for t in range(4):  # up to eos; padding leaves the state alone
        h = numpy_gru(x[t][None], h, cell.kernel.numpy(), cell.recurrent_kernel.numpy(), cell.bias.numpy())
    c = np.tanh(h @ model.encoder.summary.kernel.numpy() + model.encoder.summary.bias.numpy())
    np.testing.assert_allclose(model.encode(source)["encoding"].numpy(), c, atol=1e-5)


CANDIDATES = {
    # Cho et al. 2014, appendix A.1.2 as printed: the reset gate over U s and C c.
    "appendix": lambda y, s, c, r, W, U, C, b: np.tanh(y @ W + r * (s @ U + c @ C) + b),
    # GroundHog, which paper 004 ran: c beside the input, the reset gate on s before U.
    "groundhog": lambda y, s, c, r, W, U, C, b: np.tanh(y @ W + c @ C + (r * s) @ U + b),
}


@pytest.mark.parametrize("form", sorted(CANDIDATES))
def test_decoder_is_cho_et_al_with_c_in_the_gates_and_the_candidate_of_its_form(form):
    model = gru_model(decoder_gru_form=form)
    random_weights(model, seed=2)
    memory = model.encode(SOURCE)
    c = memory["encoding"].numpy()
    d = model.decoder.gru
    s0 = np.tanh(c @ d.init.kernel.numpy() + d.init.bias.numpy())
    np.testing.assert_allclose(model.initial_state(memory)["state"].numpy(), s0, atol=1e-5)
    ids = tf.constant([10, 20])
    y = model.decoder.embedding(ids).numpy()
    (Wz, Wr, W), (Cz, Cr, C), (Uz, Ur, U) = (
        np.split(w.numpy(), 3, axis=1) for w in (d.cell.kernel, d.cell.context_kernel, d.cell.recurrent_kernel))
    bz, br, bh = np.split(d.cell.bias.numpy(), 3)
    z = sigmoid(y @ Wz + s0 @ Uz + c @ Cz + bz)
    r = sigmoid(y @ Wr + s0 @ Ur + c @ Cr + br)
    candidate = CANDIDATES[form](y, s0, c, r, W, U, C, bh)
    s1 = z * s0 + (1 - z) * candidate
    pieces = np.concatenate([s1, y, c], axis=1) @ d.readout.kernel.numpy() + d.readout.bias.numpy()
    o = pieces.reshape(2, 6, 2).max(axis=-1)  # maxout over pairs
    output = model.decoder
    logits = o @ output.output_bottleneck.kernel.numpy() @ output.output_projection.kernel.numpy() \
        + output.output_projection.bias.numpy()
    step_logits, state = model.step(ids, 0, model.initial_state(memory), memory)
    np.testing.assert_allclose(state["state"].numpy(), s1, atol=1e-5)
    np.testing.assert_allclose(step_logits.numpy(), logits, atol=1e-4)


def test_the_two_decoder_forms_differ_on_the_same_weights_and_groundhog_is_the_default():
    appendix, groundhog = gru_model(decoder_gru_form="appendix"), gru_model()
    assert groundhog.hparams["decoder_gru_form"] == "groundhog"
    random_weights(appendix, seed=4)
    groundhog.set_weights(appendix.get_weights())
    inputs = {"source": SOURCE, "target_in": TARGET_IN}
    difference = np.abs(appendix(inputs).numpy() - groundhog(inputs).numpy()).max()
    assert difference > 1e-2, difference


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
