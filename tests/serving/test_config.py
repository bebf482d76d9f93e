"""TF Serving's model config files as `tfnmt serve --model_config_file` reads them
(serving/config.py): the shipped ones, version policies, and TF Serving's own refusals."""

import os
import re

import pytest
import tensorflow as tf

from conftest import REPO, run_cli
from tfnmt import options
from tfnmt.errors import ConfigError
from tfnmt.serving import config as config_lib
from tfnmt.serving.options import BatchingOptions


def test_shipped_tf_serving_configs_parse():
    models = config_lib.read_model_config(os.path.join(REPO, "export", "tf_serving", "models.config"))
    assert len(models) >= 3 and all(m.base_path == f"/models/{m.name}" for m in models)
    assert {"transformer", "densenmt"} <= {m.name for m in models}
    batching = config_lib.read_batching_parameters(os.path.join(REPO, "export", "tf_serving", "batching.config"))
    assert set(batching) == set(options.names(BatchingOptions))
    # The compose file pins TF Serving's release for our TensorFlow and mounts the files it names.
    with open(os.path.join(REPO, "export", "tf_serving", "docker-compose.yml")) as f:
        compose = f.read()
    assert f"tensorflow/serving:${{TF_SERVING_VERSION:-{tf.__version__}}}" in compose
    mounts = re.findall(r"- \./([\w.]+):(/config/[\w.]+):ro", compose)
    assert sorted(m[0] for m in mounts) == ["batching.config", "models.config"]
    for name, inside in mounts:
        assert os.path.isfile(os.path.join(REPO, "export", "tf_serving", name)) and f"={inside}" in compose


def test_model_config_policies_and_errors(tmp_path):
    path = tmp_path / "models.config"
    path.write_text('model_config_list { config { name: "a" base_path: "/m/a"\n'
                    '  model_version_policy { specific { versions: 3 versions: 1 } } }\n'
                    '  config { name: "b", base_path: "rel/b", model_version_policy: { all: {} } }\n'
                    '  config: { name: "c" base_path: "c" model_version_policy { latest { num_versions: 2 } } } }\n')
    a, b, c = config_lib.read_model_config(str(path))
    assert a.aspired([1, 2, 3, 4]) == [1, 3] and b.aspired([2, 1]) == [1, 2] and c.aspired([1, 5, 3]) == [3, 5]
    assert b.base_path == str(tmp_path / "rel" / "b")
    path.write_text('model_config_list {\n config { name: "a"\n base_path: "/m" }')
    with pytest.raises(ConfigError, match=r'models.config:3:18: Expected "}"'):
        config_lib.read_model_config(str(path))


def test_a_field_tf_serving_does_not_know_is_refused_with_its_message(tmp_path, capsys):
    path = tmp_path / "models.config"
    path.write_text('model_config_list {\n config { name: "a" base_pth: "/m" } }')
    assert run_cli("serve", f"--model_config_file={path}", "--rest_api_port=0") == 2
    assert capsys.readouterr().err.strip() == (
        f'tfnmt serve: error: {path}:2:21: Message type "tensorflow.serving.ModelConfig" has no '
        'field named "base_pth".')
    batching = tmp_path / "batching.config"
    batching.write_text("max_batch_size { value: 8 }\nmax_batch_sise { value: 8 }\n")
    with pytest.raises(ConfigError, match=r'batching.config:2:1: Message type '
                       r'"tensorflow.serving.BatchingParameters" has no field named "max_batch_sise"'):
        config_lib.read_batching_parameters(str(batching))


def test_every_form_tf_serving_accepts_is_understood(tmp_path):
    """Text format as TF Serving reads it: adjacent strings join, integers may be hex, a
    repeated field may be a list, and a BatchingParameters field TF Serving knows but tfnmt
    serve does not implement is accepted."""
    path = tmp_path / "models.config"
    path.write_text('model_config_list { config { name: "a" base_path: "/m/" "a"\n'
                    '  model_version_policy { specific { versions: [0x3, 1] } } } }\n')
    (model,) = config_lib.read_model_config(str(path))
    assert model.base_path == "/m/a" and model.policy == ("specific", (1, 3))
    batching = tmp_path / "batching.config"
    batching.write_text("max_batch_size { value: 8 }\nmax_execution_batch_size { value: 4 }\n"
                        "enable_large_batch_splitting { value: true }\n")
    assert config_lib.read_batching_parameters(str(batching)) == {"max_batch_size": 8}
