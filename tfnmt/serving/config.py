"""TF Serving's configuration files, read by `tfnmt serve` too: the model server config
(--model_config_file, a ModelServerConfig) and the batching parameters
(--batching_parameters_file, a BatchingParameters), both in protobuf text format.

The fields tfnmt serve acts on are read; fields TF Serving knows but tfnmt serve does not
implement are ignored with a warning; anything else is an error, as it is for TF Serving
(a misspelt field would otherwise be silently lost).
"""

import ast
import dataclasses
import os
import re

from absl import logging

from tfnmt.errors import ConfigError

_TOKEN = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<punct>[{}<>:\[\],;])
  | (?P<word>[^\s{}<>:\[\],;"'\#]+)
""", re.VERBOSE)


class _Tokens:
    def __init__(self, text, source):
        self.source = source
        self.items = []
        line, position = 1, 0
        while position < len(text):
            match = _TOKEN.match(text, position)
            if not match:
                raise ConfigError(f"{source}:{line}: cannot parse {text[position:position + 20]!r}")
            kind = match.lastgroup
            if kind != "space":
                self.items.append((kind, match.group(), line))
            line += match.group().count("\n")
            position = match.end()
        self.index = 0

    def peek(self):
        return self.items[self.index] if self.index < len(self.items) else (None, None, self._last_line())

    def take(self):
        item = self.peek()
        self.index += 1
        return item

    def _last_line(self):
        return self.items[-1][2] if self.items else 1

    def error(self, message, line=None):
        return ConfigError(f"{self.source}:{line or self.peek()[2]}: {message}")


def _scalar(tokens):
    kind, text, line = tokens.take()
    if kind == "string":
        return ast.literal_eval(text)
    if kind != "word":
        raise tokens.error(f"expected a value, found {text!r}", line)
    if re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    if re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?[fF]?", text):
        return float(text.rstrip("fF"))
    return text  # an enum or true/false


def _message(tokens, closing):
    fields = {}
    while True:
        kind, text, line = tokens.peek()
        if kind is None:
            if closing:
                raise tokens.error(f"missing {closing!r}")
            return fields
        if text == closing:
            tokens.take()
            return fields
        if kind != "word":
            raise tokens.error(f"expected a field name, found {text!r}", line)
        tokens.take()
        name = text
        has_colon = tokens.peek()[1] == ":"
        if has_colon:
            tokens.take()
        opening = tokens.peek()[1]
        if opening in ("{", "<"):
            tokens.take()
            value = _message(tokens, "}" if opening == "{" else ">")
            values = [value]
        elif opening == "[":
            tokens.take()
            values = []
            while tokens.peek()[1] != "]":
                if tokens.peek()[0] is None:
                    raise tokens.error("missing ']'")
                if tokens.peek()[1] == "{":
                    tokens.take()
                    values.append(_message(tokens, "}"))
                else:
                    values.append(_scalar(tokens))
                if tokens.peek()[1] == ",":
                    tokens.take()
            tokens.take()
        else:
            if not has_colon:
                raise tokens.error(f"expected ':' after {name}", line)
            values = [_scalar(tokens)]
        fields.setdefault(name, []).extend(values)
        if tokens.peek()[1] in (",", ";"):
            tokens.take()


def parse_text_proto(text, source="<text>"):
    """Protobuf text format -> {field: [values]}; a nested message is such a dict again."""
    return _message(_Tokens(text, source), None)


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return parse_text_proto(f.read(), path)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from None


def _check_fields(fields, known, ignored, where):
    for name in fields:
        if name in ignored:
            logging.warning("%s: %s is not implemented by tfnmt serve; ignored", where, name)
        elif name not in known:
            raise ConfigError(f"{where}: unknown field {name!r}")


def _one(fields, name, where, default=None):
    values = fields.get(name, [])
    if len(values) > 1:
        raise ConfigError(f"{where}: {name} is given {len(values)} times")
    if not values:
        if default is None:
            raise ConfigError(f"{where}: {name} is missing")
        return default
    return values[0]


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


def _policy(fields, where):
    if not fields:
        return ("latest", 1)
    _check_fields(fields, {"latest", "all", "specific"}, set(), where)
    if len(fields) != 1 or len(next(iter(fields.values()))) != 1:
        raise ConfigError(f"{where}: give exactly one of latest, all, specific")
    kind, (body,) = next(iter(fields.items()))
    if kind == "latest":
        _check_fields(body, {"num_versions"}, set(), f"{where}.latest")
        count = _one(body, "num_versions", where, 1)
        if not isinstance(count, int) or count < 1:
            raise ConfigError(f"{where}: latest.num_versions must be a positive integer")
        return ("latest", count)
    if kind == "all":
        return ("all",)
    _check_fields(body, {"versions"}, set(), f"{where}.specific")
    versions = body.get("versions", [])
    if not versions or not all(isinstance(v, int) for v in versions):
        raise ConfigError(f"{where}: specific needs integer versions")
    return ("specific", tuple(sorted(set(versions))))


def read_model_config(path):
    """The models of a ModelServerConfig file (model_config_list). A relative base_path is
    taken relative to the config file's directory."""
    fields = _read(path)
    _check_fields(fields, {"model_config_list"}, set(), path)
    if "model_config_list" not in fields:
        raise ConfigError(f"{path}: no model_config_list (tfnmt serve reads no custom_model_config)")
    listing = _one(fields, "model_config_list", path)
    _check_fields(listing, {"config"}, set(), f"{path}: model_config_list")
    models = []
    for number, config in enumerate(listing.get("config", []), start=1):
        where = f"{path}: config #{number}"
        _check_fields(config, {"name", "base_path", "model_platform", "model_version_policy"},
                      {"version_labels", "logging_config", "model_type"}, where)
        name = _one(config, "name", where)
        platform = _one(config, "model_platform", where, "tensorflow")
        if platform != "tensorflow":
            raise ConfigError(f"{where}: model_platform {platform!r}: tfnmt serve serves "
                              "TensorFlow SavedModels only")
        base_path = os.path.join(os.path.dirname(os.path.abspath(path)), _one(config, "base_path", where))
        policy = _policy(_one(config, "model_version_policy", where, {}), f"{where} ({name})")
        models.append(ModelSource(str(name), os.path.normpath(base_path), policy))
    names = [m.name for m in models]
    if not models:
        raise ConfigError(f"{path}: model_config_list has no config")
    if len(set(names)) != len(names):
        raise ConfigError(f"{path}: a model name appears twice")
    return models


BATCHING_FIELDS = ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches",
                   "num_batch_threads")


def read_batching_parameters(path):
    """{name: int} of BATCHING_FIELDS found in a BatchingParameters file."""
    fields = _read(path)
    # Inputs are string vectors: batches are concatenated, never padded.
    _check_fields(fields, set(BATCHING_FIELDS) | {"pad_variable_length_inputs"},
                  {"allowed_batch_sizes", "enable_large_batch_splitting", "max_execution_batch_size",
                   "thread_pool_name", "batch_padding_policy", "mixed_priority_batching_policy",
                   "low_priority_max_batch_size", "low_priority_batch_timeout_micros",
                   "low_priority_max_enqueued_batches", "low_priority_allowed_batch_sizes"}, path)
    values = {}
    for name in BATCHING_FIELDS:
        if name in fields:
            wrapper = _one(fields, name, path)
            value = _one(wrapper, "value", f"{path}: {name}") if isinstance(wrapper, dict) else wrapper
            if not isinstance(value, int) or value < (0 if name == "batch_timeout_micros" else 1):
                raise ConfigError(f"{path}: {name} must be a positive integer, not {value!r}")
            values[name] = value
    return values
