"""DenseNMT and residual ConvS2S as wholes (paper 000): the dense layers' widths and equations,
embeddings, switches. The decoder's own behaviour: tests/decoders/test_densenmt_decoder.py."""

import numpy as np
import pytest
import tensorflow as tf

from contract import assert_incremental_equals_teacher_forcing
from helpers.families import DENSENMT as TINY, SOURCE, TARGET_IN, densenmt as make
from tfnmt.errors import ConfigError
from tfnmt.layers.conv_blocks import summary_after
from tfnmt.models import catalog


def test_dense_layers_grow_by_the_growth_rate_and_summaries_reset_the_width():
    e, g, k = 16, 8, 3
    model = make(encoder_layers=5, decoder_layers=5, sumlen=3, attention="dense2")
    assert summary_after(5, 3) == {2, 4}
    assert summary_after(4, 5) == set() and summary_after(8, 5) == {4} and summary_after(8, 0) == set()
    # Encoder (eq. 6): layer inputs e, e+g, then after the summary e, e+g, then e.
    enc_in = [layer.conv.v.shape[1] for layer in model.encoder.convs]
    assert enc_in == [e, e + g, e, e + g, e]
    assert [model.encoder.summaries[i].conv.v.shape[1] for i in (2, 4)] == [e + 2 * g, e + 2 * g]
    # Decoder (eq. 7): every layer adds z^l and a^l, each of width g.
    dec_in = [layer.conv.v.shape[1] for layer in model.decoder.convs]
    assert dec_in == [e, e + 2 * g, e, e + 2 * g, e]
    state = model.initial_state(model.encode(SOURCE))
    assert {key: v.shape[1:] for key, v in state.items()} == {
        "layer_0": (k - 1, e), "layer_1": (k - 1, e + 2 * g), "summary_2": (k - 1, e + 4 * g),
        "layer_2": (k - 1, e), "layer_3": (k - 1, e + 2 * g), "summary_4": (k - 1, e + 4 * g),
        "layer_4": (k - 1, e)}
    # DenseAtt-2 attends over the encoder layers since the last summary (1 here), DenseAtt-1 too.
    memory = model.encode(SOURCE)
    assert len(memory["layers"]) == 5 and len(memory["layers"][0]["keys"]) == 1


def weight_normed(layer, axes):
    v, g = layer.v.numpy().astype(np.float64), layer.g.numpy()
    return v * g / np.sqrt((v ** 2).sum(axis=axes, keepdims=True) + 1e-12)


def glu_conv(layer, x, causal):
    """GLU(Conv_k(x) -> 2w) in numpy: 'same' padding, or k - 1 zeros before (causal)."""
    conv = layer.conv
    k = conv.kernel_size
    kernel = weight_normed(conv, (0, 1))
    pad = (k - 1, 0) if causal else ((k - 1) // 2, k // 2)
    padded = np.pad(x, [(0, 0), pad, (0, 0)])
    out = sum(padded[:, j:j + x.shape[1]] @ kernel[j] for j in range(k)) + conv.bias.numpy()
    a, b = np.split(out, 2, axis=-1)
    return a / (1.0 + np.exp(-b))


def summary(layer, x, causal):
    """Sec. 3.3 as the authors' code: sqrt(0.5) * (GLU(Conv(x) -> 2w) + Linear(x -> w))."""
    linear = x @ weight_normed(layer.linear, 0) + layer.linear.bias.numpy()
    return np.sqrt(0.5) * (glu_conv(layer, x, causal) + linear)


def record_calls(layers):
    """Wraps each layer's call: {name: [(input, output), ...]} as numpy."""
    seen = {}
    for layer in layers:
        def call(x, *args, _layer=layer, _call=layer.call, **kwargs):
            out = _call(x, *args, **kwargs)
            seen.setdefault(_layer.name, []).append((x.numpy(), out.numpy()))
            return out
        layer.call = call
    return seen


def assert_close(actual, expected):
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


# sumlen 0: every layer sees all before it; 3: a summary after layers 2 and 4 of 5.
@pytest.mark.parametrize("layers,sumlen,attention", [(4, 0, "dense2"), (5, 3, "dense1"),
                                                     (5, 3, "none")])
def test_dense_layers_read_eq_6_and_7_concatenations_and_summaries_are_glu_plus_linear(
        layers, sumlen, attention):
    model = make(encoder_layers=layers, decoder_layers=layers, sumlen=sumlen, attention=attention)
    rng = np.random.default_rng(3)
    for w in model.weights:  # biases and gains too, so that every term shows in the outputs
        w.assign(rng.normal(0, 0.5, w.shape).astype(np.float32))
    seen = record_calls(model.encoder.convs + list(model.encoder.summaries.values())
                        + model.decoder.convs + list(model.decoder.summaries.values())
                        + model.decoder.attention_out + [model.decoder.output_features])
    model({"source": SOURCE, "target_in": TARGET_IN})
    source, target = SOURCE.numpy(), TARGET_IN.numpy()
    keep = (source != 0)[:, :, None]

    def embedded(embedder, ids):
        return (embedder.embedding.embeddings.numpy()[ids]
                + embedder.position_embedding.embeddings.numpy()[np.arange(ids.shape[1])])

    def check(name, expected_input, function, layer, causal):
        (x, out), = seen[name]
        assert_close(x, expected_input)  # which features, in which order
        expected = function(layer, expected_input, causal)
        assert_close(out, expected)
        return expected

    # Eq. 6, oldest first: h^{l+1} = H([h^0; h^1; ...; h^l]) (the paper writes newest first; the
    # order only permutes the convolution's input rows: same functions, init and weight norm);
    # padding zeroed before every convolution. A summary s replaces everything before it: later
    # layers read [s; h^..].
    features = [embedded(model.encoder.embedder, source)]
    for i, layer in enumerate(model.encoder.convs, start=1):
        features.append(check(layer.name, np.concatenate(features, -1) * keep, glu_conv, layer,
                              causal=False))
        if i in model.encoder.summaries:
            features = [check(f"encoder_summary_{i}", np.concatenate(features, -1) * keep, summary,
                              model.encoder.summaries[i], causal=False)]
    # Eq. 7: z^{l+1} = H([z^0; z^1; a^1; ...; z^l; a^l]) with a^l the attention of layer l
    # (projected to the growth width); causal convolutions.
    features = [embedded(model.decoder.embedder, target)]
    for i, layer in enumerate(model.decoder.convs):
        features.append(check(layer.name, np.concatenate(features, -1), glu_conv, layer,
                              causal=True))
        if attention != "none":
            (_, a), = seen[f"decoder_attention_out_{i}"]
            features.append(a)
        if i + 1 in model.decoder.summaries:
            features = [check(f"decoder_summary_{i + 1}", np.concatenate(features, -1), summary,
                              model.decoder.summaries[i + 1], causal=True)]
    # The output reads the layers since the last summary.
    (x, _), = seen["decoder_out"]
    assert_close(x, np.concatenate(features, -1))


@pytest.mark.slow
def test_small_embeddings_are_projected_to_the_model_width():
    model = make(table_dim=4)
    assert model.encoder.embedder.embedding.embeddings.shape == (50, 4)
    assert model.decoder.embedder.embedding.embeddings.shape == (60, 4)
    assert model.encoder.embedder.projection.kernel.shape == (4, 16)
    assert model.decoder.output_projection.v.shape == (4, 60)  # the softmax matrix is 4 wide too
    assert make().encoder.embedder.projection is None


@pytest.mark.slow
def test_narrow_positions_are_table_dim_wide_with_their_own_projection():
    # The authors' released code: a position table as narrow as the token table, and its own
    # linear map to the model width.
    narrow, wide = make(table_dim=4), make(table_dim=4, narrow_positions=False)
    assert narrow.hparams["narrow_positions"]
    embedder = narrow.encoder.embedder
    assert embedder.position_embedding.embeddings.shape == (1024, 4)
    assert embedder.position_projection.kernel.shape == (4, 16)
    assert wide.encoder.embedder.position_embedding.embeddings.shape == (1024, 16)
    assert wide.encoder.embedder.position_projection is None
    # Per side: 1024 x 16 -> 1024 x 4 + 4 x 16.
    assert wide.count_params() - narrow.count_params() == 2 * (1024 * 16 - 1024 * 4 - 4 * 16)
    ids = tf.constant([[5, 6, 7]])
    tokens = embedder.embedding(ids).numpy() @ embedder.projection.kernel.numpy()
    positions = (embedder.position_embedding.embeddings.numpy()[:3]
                 @ embedder.position_projection.kernel.numpy())
    np.testing.assert_allclose(embedder.embed(ids).numpy(), tokens + positions[None], rtol=1e-5,
                               atol=1e-6)
    # With tables as wide as the model there is nothing to narrow.
    assert make().encoder.embedder.position_projection is None


def test_the_paper_base_4l_at_embedding_64_has_its_narrow_positions(monkeypatch, capsys):
    # 7,558,016 with 256-wide position tables; 2 x (1024 x 256 - 1024 x 64 - 64 x 256) fewer.
    from conftest import REPO, run_cli
    monkeypatch.chdir(REPO)
    assert run_cli("info", "--flagfile=configs/densenmt/iwslt14/base-4l-e64.cfg") == 0
    total = int(capsys.readouterr().out.split("total")[1].split()[0].replace(",", ""))
    assert total == 7_558_016 - 2 * (1024 * 256 - 1024 * 64 - 64 * 256) == 7_197_568, total


@pytest.mark.parametrize("bad", [dict(attention="dense3"), dict(encoder="sparse"),
                                 dict(decoder_layers=0)])
def test_bad_switches_are_config_errors(bad):
    with pytest.raises(ConfigError):
        catalog.get("densenmt")(50, 60, **dict(TINY, **bad))


def test_convs2s_pins_the_residual_switches():
    with pytest.raises(ConfigError, match="no hyper-parameter attention"):
        catalog.get("convs2s")(50, 60, attention="dense2")
    model = catalog.get("convs2s")(50, 60, embed_dim=16, residual_dim=12, table_dim=8)
    model.build_with_dummy_batch()
    assert model.settings["encoder"] == "residual" and model.settings["attention"] == "multistep"
    assert model.encoder.embedder.embedding.embeddings.shape == (50, 8)


@pytest.mark.slow
@pytest.mark.parametrize("decoder,attention", [("dense", "dense2"), ("residual", "multistep")])
def test_shared_and_tied_tables_are_one_matrix_for_source_target_and_softmax(decoder, attention):
    # The phone model's (not the paper's): source, target and softmax share one table.
    def build(**flags):
        model = catalog.get("densenmt")(50, 50, **dict(TINY, table_dim=6, decoder=decoder,
                                                       attention=attention, **flags))
        model.build_with_dummy_batch()
        return model
    separate, tied = build(), build(share_embeddings=True, tie_output=True)
    table = tied.encoder.embedder.embedding
    assert tied.decoder.embedder.embedding is table and tied.decoder.output_projection is None
    # One 50 x 6 table for two; no softmax matrix (v 6 x 50, g and bias 50 each).
    assert separate.count_params() - tied.count_params() == 50 * 6 + (6 * 50 + 50 + 50)
    assert_incremental_equals_teacher_forcing(tied, SOURCE, TARGET_IN, atol=1e-5)
    # The logits are the features times the table, no bias: a zero row gives a zero logit.
    weights = table.embeddings.numpy()
    weights[17] = 0
    table.embeddings.assign(weights)
    logits = tied({"source": SOURCE, "target_in": TARGET_IN}).numpy()
    assert np.all(logits[..., 17] == 0) and np.all(logits[..., 18] != 0)


def test_shared_tables_need_a_joint_vocabulary():
    with pytest.raises(ConfigError, match="--share_embeddings needs a joint vocabulary"):
        catalog.get("densenmt")(50, 60, **dict(TINY, share_embeddings=True))
