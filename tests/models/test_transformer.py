import numpy as np
import pytest
import tensorflow as tf

from contract import assert_incremental_equals_teacher_forcing
from tfnmt.errors import ConfigError
from tfnmt.models import catalog

SMALL = dict(encoder_layers=2, decoder_layers=2, d_model=32, ffn_dim=64, num_heads=4)
SOURCE = tf.constant([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]])
TARGET_IN = tf.constant([[2, 10, 11, 12], [2, 13, 14, 0]])


def make(**overrides):
    model = catalog.get("transformer")(50, 50, **dict(SMALL, **overrides))
    model.build_with_dummy_batch()
    return model


@pytest.mark.parametrize("pre_norm", [False, True])
@pytest.mark.parametrize("tie_output", [False, True])
def test_incremental_steps_equal_teacher_forcing(pre_norm, tie_output):
    model = make(pre_norm=pre_norm, tie_output=tie_output)
    assert_incremental_equals_teacher_forcing(model, SOURCE, TARGET_IN)


def test_source_padding_is_masked():
    model = make()
    longer = tf.pad(SOURCE, [[0, 0], [0, 3]])
    a = model({"source": SOURCE, "target_in": TARGET_IN})
    b = model({"source": longer, "target_in": TARGET_IN})
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)


def test_decoder_is_causal():
    model = make()
    changed = tf.tensor_scatter_nd_update(TARGET_IN, [[0, 3]], [40])
    a = model({"source": SOURCE, "target_in": TARGET_IN}).numpy()
    b = model({"source": SOURCE, "target_in": changed}).numpy()
    np.testing.assert_allclose(a[0, :3], b[0, :3], atol=1e-5)
    assert not np.allclose(a[0, 3], b[0, 3])


def test_shared_embeddings_share_one_matrix_and_need_a_joint_vocab():
    shared = make(share_embeddings=True)
    separate = make(share_embeddings=False)
    assert len(separate.trainable_weights) - len(shared.trainable_weights) == 1
    with pytest.raises(ConfigError, match="joint vocabulary"):
        catalog.get("transformer")(50, 60, share_embeddings=True)


def test_config_round_trip_rebuilds_the_same_architecture():
    model = make(pre_norm=True)
    clone = type(model).from_config(model.get_config())
    clone.build_with_dummy_batch()
    assert [w.shape for w in clone.weights] == [w.shape for w in model.weights]
    assert clone.get_config() == model.get_config()


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="not divisible"):
        catalog.get("transformer")(50, 50, d_model=30, num_heads=4)
    with pytest.raises(ConfigError, match="unknown model 'transfomer'; known models: .*transformer"):
        catalog.get("transfomer")


def test_unknown_hyper_parameter_is_refused_and_defaults_are_recorded():
    with pytest.raises(ConfigError, match="no hyper-parameter d_modle"):
        catalog.get("transformer")(50, 50, d_modle=64)
    assert make().get_config()["tie_output"] is True  # a default, recorded in the config
