"""TF Serving's REST API as a WSGI application (model_servers/http_rest_api_handler.cc,
util/json_tensor.cc, model_servers/http_server.cc of tensorflow/serving describe the original):

    GET  /v1/models/NAME[/versions/V]              model status
    GET  /v1/models/NAME[/versions/V]/metadata     signature defs
    POST /v1/models/NAME[/versions/V]:predict      {"instances": [...]} or {"inputs": ...}

and, unless turned off (`tfnmt serve --nodemo`), a demo page (tfnmt/serving/demo.html) at
`GET /` with the list of served models it reads at `GET /demo/models`.

Errors are `{"error": "MESSAGE"}` with TF Serving's status: 400 for a malformed request
(bad JSON, JSON strings that are not text, unknown signature, wrong input, over this server's
limits on sentences), 413 for a body over --max_request_bytes, 404 for an unknown model or
version, 503 when the batching queue is full, 504 past --rest_api_timeout_in_ms. Messages follow
TF Serving's where it has one for the case, and name the item and the flag concerned.

Against web pages: 415 for a :predict body not sent as application/json and 403 for a Host
header that is not this server's (web_safety.py), `X-Content-Type-Options: nosniff` on every
answer (here and server.py), and the demo page's Content-Security-Policy (web_safety.py).
Bodies are written as TF Serving writes them (tf_json.py).
"""

import base64
import json
import os
import re
import time

from absl import logging
from google.protobuf import json_format
from tensorflow.core.framework import types_pb2

from tfnmt.serving.options import ServeOptions
from tfnmt.serving.status import (ServingError, invalid_argument, request_too_large,
                                  sentence_too_long)
from tfnmt.serving.tf_json import dumps, error_body, predict_response
from tfnmt.serving.web_safety import check_json_body, demo_page_policy, host_allowed, host_name

_PREDICT = re.compile(r"/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?"
                      r":(classify|regress|predict)", re.IGNORECASE)
_STATUS = re.compile(r"/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?"
                     r"(?:/(metadata))?", re.IGNORECASE)
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            409: "Conflict", 413: "Payload Too Large", 415: "Unsupported Media Type",
            429: "Too Many Requests", 499: "Client Closed Request",
            500: "Internal Server Error", 501: "Not Implemented", 503: "Service Unavailable",
            504: "Gateway Timeout"}
_INT64_MAX = (1 << 63) - 1
DEMO_PAGE = os.path.join(os.path.dirname(__file__), "demo.html")


def _short(value):
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= 200 else text[:200] + "..."


# --- the request ---------------------------------------------------------------------------------

_VALUE = 'a value (a string or {"b64": ...})'


def _named(item):
    """A named instance ({"text": ...}), as opposed to a value (a string or {"b64": ...})."""
    return isinstance(item, dict) and "b64" not in item


def _string(value, where):
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str):
        try:
            data = base64.b64decode(value["b64"], validate=True)
        except ValueError:
            raise invalid_argument(f"{where}Unable to base64 decode") from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise invalid_argument(f'{where}the {{"b64": ...}} value decodes to bytes that are not '
                                   f"UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start}); "
                                   "tfnmt models translate UTF-8 text") from None
    kind = {list: "Array", dict: "Object", bool: "Bool", type(None): "Null"}.get(type(value), "Number")
    raise invalid_argument(f"{where}JSON Value: {_short(value)} Type: {kind} is not of expected "
                           "type: string")


def _lone_surrogate(request):
    """Where the first string holding a lone UTF-16 surrogate is, and that surrogate, or None.
    Python's JSON parser accepts "\\ud800" (rapidjson, TF Serving's, does not), but it is no
    text: it cannot be encoded as UTF-8, for the model or for an error message."""
    pending = [(request, "")]
    while pending:  # not recursive: the parser already accepted as deep a nesting as it could
        value, where = pending.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                return where, value[e.start]
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                name = key if key.isidentifier() else json.dumps(key)
                pending.append((item, f"{where}.{name}" if where else name))
                pending.append((key, f"a key of {where or 'the request'}"))
        elif isinstance(value, list):
            pending.extend((item, f"{where}[{i}]") for i, item in reversed(list(enumerate(value))))
    return None


def parse_predict_request(body):
    """(signature_name, the request object) of a predict request body (bytes)."""
    if not body.strip():
        raise invalid_argument("JSON Parse error: The document is empty")
    try:
        request = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise invalid_argument(f"JSON Parse error: Invalid encoding in string. at offset: {e.start}") from None
    except json.JSONDecodeError as e:
        raise invalid_argument(f"JSON Parse error: {e.msg} at offset: {e.pos}") from None
    except RecursionError:
        raise invalid_argument("JSON Parse error: nested too deeply (arrays or objects within "
                               "each other)") from None
    except ValueError as e:  # e.g. an integer of more digits than Python converts
        raise invalid_argument(f"JSON Parse error: {e}") from None
    surrogate = _lone_surrogate(request)
    if surrogate:
        where, char = surrogate
        raise invalid_argument(f"JSON Parse error: The surrogate pair in string is invalid: {where} "
                               f"has a lone surrogate {char!a} (a JSON string must be Unicode text; "
                               "a surrogate escape needs its pair)")
    if not isinstance(request, dict):
        raise invalid_argument(f"JSON Value: {_short(request)} Is not object")
    signature = request.get("signature_name", "")
    if not isinstance(signature, str):
        raise invalid_argument(f"JSON Value: {_short(request)} not formatted correctly. "
                               "'signature_name' key must be a string value.")
    if "instances" in request and "inputs" in request:
        raise invalid_argument(f"JSON Value: {_short(request)} Not formatted correctly expecting "
                               "only one of 'inputs' or 'instances' keys to exist ")
    return signature, request


def request_texts(request, input_name):
    """([input strings], row_format) of a predict request to a signature whose one input is a
    string vector."""
    if "instances" in request:
        instances = request["instances"]
        if not isinstance(instances, list):
            raise invalid_argument(f"JSON Value: {_short(request)} Expecting 'instances' to be an list/array")
        if not instances:
            raise invalid_argument(f"JSON Value: {_short(request)} No values in 'instances' array")
        named = _named(instances[0])
        texts = []
        for i, item in enumerate(instances):
            where = f"Failed to process element: {i} of 'instances' list. Error: "
            if _named(item) != named:
                instance = f'a named instance ({{"{input_name}": ...}})'
                raise invalid_argument(f"'instances' item {i} is {instance if not named else _VALUE} "
                                       f"but item 0 is {instance if named else _VALUE}: give every "
                                       "instance in the same form")
            if named:
                if set(item) != {input_name}:
                    raise invalid_argument(f"Failed to process element: {i} of 'instances' list. "
                                           f"JSON object: {_short(item)} keys must be equal to: {input_name}")
                item = item[input_name]
            texts.append(_string(item, where))
        return texts, True
    if "inputs" in request:
        inputs = request["inputs"]
        if isinstance(inputs, dict) and "b64" not in inputs:
            if input_name not in inputs:
                raise invalid_argument(f"Missing named input: {input_name} in 'inputs' object.")
            inputs = inputs[input_name]
        if not isinstance(inputs, list):
            raise invalid_argument(f"input '{input_name}' must be a list of strings (its shape is [-1])")
        return [_string(item, f"input '{input_name}' item {i}: ") for i, item in enumerate(inputs)], False
    raise invalid_argument("Missing 'inputs' or 'instances' key")


def request_rows(request, input_names):
    """([input strings, or tuples of them in the order of `input_names`], row_format) of a
    predict request to a signature whose inputs are string vectors: with several, every
    instance names each ({"text": ..., "prefix": ...}), or "inputs" gives each a list of the
    same length."""
    if len(input_names) == 1:
        return request_texts(request, input_names[0])
    expected = ",".join(input_names)
    if "instances" in request:
        instances = request["instances"]
        if not isinstance(instances, list) or not instances:
            return request_texts(request, input_names[0])  # its own message for these
        rows = []
        for i, item in enumerate(instances):
            if not _named(item) or set(item) != set(input_names):
                raise invalid_argument(f"Failed to process element: {i} of 'instances' list. "
                                       f"JSON object: {_short(item)} keys must be equal to: "
                                       f"{expected}")
            rows.append(tuple(_string(item[name], f"Failed to process element: {i} of "
                                                  f"'instances' list. Error: ")
                              for name in input_names))
        return rows, True
    if "inputs" in request:
        inputs = request["inputs"]
        if not isinstance(inputs, dict) or set(inputs) != set(input_names):
            raise invalid_argument(f"'inputs' must be an object with the named inputs "
                                   f"{expected}, each a list of strings")
        columns = [request_texts({"inputs": {name: inputs[name]}}, name)[0]
                   for name in input_names]
        if len({len(column) for column in columns}) > 1:
            raise invalid_argument(f"inputs {expected} have {', '.join(str(len(c)) for c in columns)} "
                                   "values: give each the same number")
        return list(zip(*columns)), False
    raise invalid_argument("Missing 'inputs' or 'instances' key")


def _metadata_json(servable):
    definitions = {name: json_format.MessageToDict(servable.signature_defs[name],
                                                   preserving_proto_field_name=True,
                                                   always_print_fields_with_no_presence=True)
                   for name in sorted(servable.signature_defs)}
    return {"model_spec": {"name": servable.name, "signature_name": "",
                           "version": str(servable.version)},
            "metadata": {"signature_def": {"signature_def": definitions}}}


class RestApi:
    """The WSGI application. Limits bound the work one request may ask for."""

    def __init__(self, manager, options=ServeOptions()):
        self.manager = manager
        self.demo = options.demo
        self.max_request_bytes = options.max_request_bytes
        self.max_sentences = options.max_sentences_per_request
        self.max_sentence_chars = options.max_sentence_chars
        self.timeout = options.rest_api_timeout_in_ms / 1000
        self.bound = options.rest_api_host.strip().strip("[]").lower()
        self.allowed_hosts = {host_name(name) or name.strip()
                              for name in options.rest_api_allowed_hosts.split(",") if name.strip()}

    def __call__(self, environ, start_response):
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        start = time.perf_counter()
        content_type = "application/json"
        headers = [("X-Content-Type-Options", "nosniff")]
        try:
            status = 200
            self._check_host(environ)
            if self.demo and method == "GET" and path in ("/", "/demo/models"):
                content_type, body = self._demo(path)
                if path == "/":
                    headers.append(("Content-Security-Policy", demo_page_policy(body)))
            else:
                body = self._dispatch(method, path, environ)
        except ServingError as e:
            status, body = e.http_status, error_body(e.message)
        except Exception as e:  # a bug must not take the server down; report it as TF Serving would
            logging.exception("%s %s failed", method, path)
            status, body = 500, error_body(f"{type(e).__name__}: {e}")
        data = body.encode("utf-8")
        start_response(f"{status} {_REASONS.get(status, 'Error')}",
                       [("Content-Type", content_type), ("Content-Length", str(len(data))), *headers])
        if status != 200:
            logging.info("%s %s -> %d (%.0f ms)", method, path, status, 1000 * (time.perf_counter() - start))
        return [data]

    def _check_host(self, environ):
        # No Host header: HTTP/1.0, from no browser (a browser always sends one).
        header = environ.get("HTTP_HOST")
        if header is None:
            return
        host = host_name(header)
        if not host_allowed(host, self.bound, self.allowed_hosts):
            raise ServingError(
                "PERMISSION_DENIED", f"Host {host if host is not None else header!r} is not "
                f"one this server answers for (localhost, {self.bound}, loopback addresses"
                f"{''.join(', ' + n for n in sorted(self.allowed_hosts))}): add it with "
                "--rest_api_allowed_hosts")

    def _demo(self, path):
        """(content type, body) of the demo page or of its list of served models."""
        if path == "/":
            with open(DEMO_PAGE, encoding="utf-8") as f:
                return "text/html; charset=utf-8", f.read()
        models = []
        for name in self.manager.names():
            try:
                servable = self.manager.get(name)
            except ServingError:  # unloaded since names() was read
                continue
            signatures = sorted(n for n in servable.signature_defs if not n.startswith("__"))
            models.append({"name": name, "version": servable.version, "signatures": signatures,
                           "alignments": "alignments" in signatures,
                           "prefix": "prefix" in signatures})
        return "application/json", json.dumps({"models": models}, ensure_ascii=False)

    def _dispatch(self, method, path, environ):
        if not re.fullmatch(r"/v1/.*", path, re.IGNORECASE):
            raise ServingError("NOT_FOUND", f"Not found: {path} (the REST API is under /v1/models/)")
        malformed = invalid_argument(f"Malformed request: {method} {path}")
        pattern = _PREDICT if method == "POST" else _STATUS if method == "GET" else None
        match = pattern.fullmatch(path) if pattern else None
        if not match:
            raise malformed
        name, version, label = match.group(1), match.group(2), match.group(3)
        if version is not None:
            if int(version) > _INT64_MAX:
                raise invalid_argument(f"Failed to convert version: {version} to numeric.")
            version = int(version)
        if label is not None:
            raise invalid_argument(f"Unrecognized servable version label: {label}")
        if method == "GET":
            if not name:
                raise invalid_argument("Missing model name in request.")
            if match.group(4):
                return json.dumps(_metadata_json(self.manager.get(name, version)), indent=1,
                                  ensure_ascii=False)
            statuses = [{"version": str(v), "state": state,
                         "status": {"error_code": code, "error_message": message}}
                        for v, state, code, message in self.manager.status(name, version)]
            return json.dumps({"model_version_status": statuses}, indent=1, ensure_ascii=False)
        check_json_body(environ)
        if match.group(4).lower() != "predict":
            raise invalid_argument(f"tfnmt models answer :predict, not :{match.group(4)}")
        return self._predict(name, version, environ)

    def _read_body(self, environ):
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > self.max_request_bytes:
            raise request_too_large(length, self.max_request_bytes)
        body = environ["wsgi.input"].read(length if length else self.max_request_bytes + 1)
        if len(body) > self.max_request_bytes:
            raise request_too_large(None, self.max_request_bytes)
        return body

    def _predict(self, name, version, environ):
        body = self._read_body(environ)
        signature, request = parse_predict_request(body)
        servable = self.manager.get(name, version)
        spec = servable.input_spec(signature)
        for input_name, dtype in spec:
            if dtype != types_pb2.DT_STRING:
                raise invalid_argument(f"signature input {input_name} is "
                                       f"{types_pb2.DataType.Name(dtype)}; tfnmt serve feeds "
                                       "strings")
        texts, row_format = request_rows(request, [name for name, _ in spec])
        if len(texts) > self.max_sentences:
            raise invalid_argument(f"Request has {len(texts)} sentences; this server takes at most "
                                   f"{self.max_sentences} per request (--max_sentences_per_request)")
        for i, row in enumerate(texts):
            for text in (row,) if isinstance(row, str) else row:
                if len(text) > self.max_sentence_chars:
                    raise sentence_too_long(i, len(text), self.max_sentence_chars)
        outputs = servable.predict(signature, texts, self.timeout)
        return dumps(predict_response(outputs, row_format))
