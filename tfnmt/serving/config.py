"""TF Serving's configuration files, read by `tfnmt serve` too: the model server config
(--model_config_file, a ModelServerConfig) and the batching parameters
(--batching_parameters_file, a BatchingParameters), both in protobuf text format.

They are parsed by protobuf's text_format into TF Serving's own messages, so a file means to
tfnmt serve what it means to TF Serving, and a file TF Serving refuses (a misspelt field, a
value of the wrong type) is refused with the same message. The fields tfnmt serve acts on are
read; fields TF Serving knows but tfnmt serve does not implement are ignored with a warning.
"""

import dataclasses
import os

from absl import logging
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
from google.protobuf import wrappers_pb2
from tensorflow_serving.config import model_server_config_pb2

from tfnmt import options
from tfnmt.errors import ConfigError
from tfnmt.serving.options import BatchingOptions


def _batching_parameters_class():
    """TF Serving's BatchingParameters message (tensorflow_serving/servables/tensorflow/
    session_bundle_config.proto, release 2.21), which the tensorflow-serving-api package does
    not ship: its fields, numbers and types as TF Serving declares them."""
    wrappers = descriptor_pb2.FileDescriptorProto()
    wrappers_pb2.DESCRIPTOR.CopyToProto(wrappers)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(wrappers)
    proto = descriptor_pb2.FileDescriptorProto(
        name="tensorflow_serving/servables/tensorflow/session_bundle_config.proto",
        package="tensorflow.serving", syntax="proto3",
        dependency=["google/protobuf/wrappers.proto"])
    message = proto.message_type.add(name="BatchingParameters")
    field = descriptor_pb2.FieldDescriptorProto
    for name, number, wrapper in [
            ("max_batch_size", 1, "Int64Value"), ("batch_timeout_micros", 2, "Int64Value"),
            ("max_enqueued_batches", 3, "Int64Value"), ("num_batch_threads", 4, "Int64Value"),
            ("thread_pool_name", 5, "StringValue"), ("enable_large_batch_splitting", 8, "BoolValue"),
            ("max_execution_batch_size", 9, "Int64Value")]:
        message.field.add(name=name, number=number, type=field.TYPE_MESSAGE,
                          label=field.LABEL_OPTIONAL, type_name=f".google.protobuf.{wrapper}")
    message.field.add(name="allowed_batch_sizes", number=6, type=field.TYPE_INT64,
                      label=field.LABEL_REPEATED)
    message.field.add(name="pad_variable_length_inputs", number=7, type=field.TYPE_BOOL,
                      label=field.LABEL_OPTIONAL)
    pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters"))


BatchingParameters = _batching_parameters_class()


def _read(path, message):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path} is not UTF-8 text: {e.reason}") from None
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as e:
        if e.GetLine() is None:
            raise ConfigError(f"{path}: {e}") from None
        # str(e) is "LINE:COLUMN : message".
        raise ConfigError(f"{path}:{e.GetLine()}:{e.GetColumn()}: {str(e).split(' : ', 1)[-1]}") from None
    return message


def _ignored(message, names, where):
    given = {field.name for field, _ in message.ListFields()}
    for name in names:
        if name in given:
            logging.warning("%s: %s is not implemented by tfnmt serve; ignored", where, name)


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """One served model: its name, the directory of its numbered versions, the version policy
    ("latest", n), ("all",) or ("specific", (v1, v2, ...))."""
    name: str
    base_path: str
    policy: tuple = ("latest", 1)

    def aspired(self, versions):
        """The versions to serve, of those present."""
        versions = sorted(versions)
        if self.policy[0] == "latest":
            return versions[-self.policy[1]:] if versions else []
        if self.policy[0] == "all":
            return versions
        return [v for v in versions if v in self.policy[1]]


def _policy(policy, where):
    kind = policy.WhichOneof("policy_choice")
    if kind is None:
        return ("latest", 1)
    if kind == "latest":
        # TF Serving's default for an unset (zero) num_versions is 1.
        return ("latest", policy.latest.num_versions or 1)
    if kind == "all":
        return ("all",)
    if not policy.specific.versions:
        raise ConfigError(f"{where}: specific needs versions")
    return ("specific", tuple(sorted(set(policy.specific.versions))))


def read_model_config(path):
    """The models of a ModelServerConfig file (model_config_list). A relative base_path is
    taken relative to the config file's directory."""
    config = _read(path, model_server_config_pb2.ModelServerConfig())
    if not config.HasField("model_config_list"):
        raise ConfigError(f"{path}: no model_config_list (tfnmt serve reads no custom_model_config)")
    models = []
    for number, model in enumerate(config.model_config_list.config, start=1):
        where = f"{path}: config #{number}"
        _ignored(model, ("version_labels", "logging_config", "model_type"), where)
        if not model.name or not model.base_path:
            raise ConfigError(f"{where}: {'name' if not model.name else 'base_path'} is missing")
        platform = model.model_platform or "tensorflow"
        if platform != "tensorflow":
            raise ConfigError(f"{where}: model_platform {platform!r}: tfnmt serve serves "
                              "TensorFlow SavedModels only")
        base_path = os.path.join(os.path.dirname(os.path.abspath(path)), model.base_path)
        policy = _policy(model.model_version_policy, f"{where} ({model.name})")
        models.append(ModelSource(model.name, os.path.normpath(base_path), policy))
    names = [m.name for m in models]
    if not models:
        raise ConfigError(f"{path}: model_config_list has no config")
    if len(set(names)) != len(names):
        raise ConfigError(f"{path}: a model name appears twice")
    return models


def read_batching_parameters(path):
    """{name: int} of the BatchingOptions fields set in a BatchingParameters file."""
    parameters = _read(path, BatchingParameters())
    # Inputs are string vectors: batches are concatenated, never padded, and a request larger
    # than a batch is always split (serving/batching.py).
    _ignored(parameters, ("thread_pool_name", "allowed_batch_sizes", "max_execution_batch_size",
                          "enable_large_batch_splitting"), path)
    values = {name: getattr(parameters, name).value for name in options.names(BatchingOptions)
              if parameters.HasField(name)}
    try:
        options.check(BatchingOptions(**values))
    except ConfigError as e:
        raise ConfigError(f"{path}: {str(e).lstrip('-')}") from None
    return values
