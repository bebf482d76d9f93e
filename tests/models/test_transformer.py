"""The Transformer as a whole: padding, shared embeddings, its config and its errors. Its
decoder's own behaviour: tests/decoders/test_transformer_decoder.py."""

import numpy as np
import pytest
import tensorflow as tf

from helpers.families import SOURCE, TARGET_IN, transformer as make
from tfnmt.errors import ConfigError
from tfnmt.models import catalog


def test_source_padding_is_masked():
    model = make()
    longer = tf.pad(SOURCE, [[0, 0], [0, 3]])
    a = model({"source": SOURCE, "target_in": TARGET_IN})
    b = model({"source": longer, "target_in": TARGET_IN})
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)


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
