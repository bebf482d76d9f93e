"""`tfnmt serve` (TF Serving's REST API on loopback) and the `--server` client, against a tiny
exported model. Its configuration files: test_config.py; the batcher: test_batching.py; its
JSON: test_tf_json.py; the client without a server: test_client.py; the Host allow-list:
test_web_safety.py; what `serve` refuses: test_server.py."""

import base64
import contextlib
import json
import os
import re
import shutil
import threading
import time

import numpy as np
import pytest
import requests
import tensorflow as tf

from conftest import REPO, run_cli
from helpers.serving import wsgi as _wsgi
from tfnmt import model_dir as model_dir_lib
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.translator import Translator
from tfnmt.serving import server as server_lib
from tfnmt.serving.client import ServingClient, load_test
from tfnmt.serving.models import ModelManager
from tfnmt.serving.options import BatchingOptions, ServeOptions
from tfnmt.serving.rest import RestApi
from tfnmt.training import checkpoints

SENTENCES = ["the red dog sees a bird", "a cat", "", "the old man runs", "big house"]


@pytest.fixture(scope="module")
def exports(trained_model, tmp_path_factory):
    """base/tiny/1 (beam 3, with an n_best signature of 3 and a prefix signature) and
    base/greedy/1 (beam 1), and a models.config naming both by paths relative to it."""
    base = str(tmp_path_factory.mktemp("exports"))
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={base}",
                   "--beam_size=3", "--n_best=3", "--prefix", "--export_name=tiny") == 0
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={base}",
                   "--beam_size=1", "--export_name=greedy") == 0
    config = os.path.join(base, "models.config")
    with open(config, "w") as f:
        f.write('model_config_list {\n'
                '  config { name: "tiny" base_path: "tiny" model_platform: "tensorflow" }\n'
                '  config { name: "greedy" base_path: "greedy"\n'
                '           model_version_policy { latest { num_versions: 1 } } }\n'
                '}\n')
    return base, config


@pytest.fixture(scope="module")
def server(exports, tmp_path_factory):
    base, config = exports
    log = str(tmp_path_factory.mktemp("serve") / "serve.log")
    process, url = server_lib.spawn(
        [f"--model_config_file={config}", "--rest_api_port=0", "--file_system_poll_wait_seconds=1",
         "--max_sentences_per_request=8", "--max_sentence_chars=200", "--max_request_bytes=8192",
         "--max_batch_size=8", "--batch_timeout_micros=20000"], env=dict(os.environ, PYTHONPATH=REPO),
        log_path=log)
    yield url
    server_lib.stop(process)


def _post(url, body, content_type="application/json"):
    return requests.post(url, data=body if isinstance(body, (bytes, str)) else json.dumps(body),
                         headers={"Content-Type": content_type} if content_type else {},
                         timeout=120)


# {(model directory, beam size): its Translator}: made once, so that each search is traced once
# in this file, not once per comparison (the translations are the same either way).
_TRANSLATORS = {}


def _in_process(trained_model, beam_size, sentences, prefixes=None):
    if (trained_model, beam_size) not in _TRANSLATORS:
        _, model, source_vocab, target_vocab = model_dir_lib.load(trained_model)
        checkpoints.restore_model(model, checkpoints.resolve(trained_model))
        _TRANSLATORS[trained_model, beam_size] = Translator(
            model, source_vocab, target_vocab, DecodingOptions(beam_size=beam_size))
    translator = _TRANSLATORS[trained_model, beam_size]
    out = (translator.translate(tf.constant(sentences)) if prefixes is None else
           translator.prefix_signature(tf.constant(sentences), tf.constant(prefixes)))
    return [t.decode() for t in out["translations"].numpy()], out["scores"].numpy()


@pytest.mark.slow
def test_export_runs_in_a_graph_mode_session_as_tf_serving_loads_it(exports, trained_model):
    # TF Serving's C++ loader imports the MetaGraph, runs its restore op and init op in a
    # Session, then runs the signature's tensors: the TF1 loader below does the same.
    base, _ = exports
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta_graph = tf.compat.v1.saved_model.load(session, ["serve"], os.path.join(base, "tiny", "1"))
        signature = meta_graph.signature_def["serving_default"]
        out = session.run({k: v.name for k, v in signature.outputs.items()},
                          {signature.inputs["text"].name: SENTENCES})
    expected, scores = _in_process(trained_model, 3, SENTENCES)
    assert [t.decode() for t in out["translations"]] == expected
    np.testing.assert_array_equal(out["scores"], scores)


@pytest.mark.slow
def test_status_and_metadata(server):
    status = requests.get(f"{server}/v1/models/tiny", timeout=30)
    assert status.status_code == 200 and status.headers["Content-Type"] == "application/json"
    assert status.json() == {"model_version_status": [
        {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}
    assert requests.get(f"{server}/v1/models/tiny/versions/1", timeout=30).json() == status.json()
    metadata = requests.get(f"{server}/v1/models/tiny/metadata", timeout=30).json()
    assert metadata["model_spec"] == {"name": "tiny", "signature_name": "", "version": "1"}
    signature = metadata["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert signature["method_name"] == "tensorflow/serving/predict"
    assert signature["inputs"]["text"]["dtype"] == "DT_STRING"
    assert signature["inputs"]["text"]["tensor_shape"]["dim"] == [{"size": "-1", "name": ""}]
    assert {k: v["dtype"] for k, v in signature["outputs"].items()} == {
        "translations": "DT_STRING", "scores": "DT_FLOAT"}


@pytest.mark.slow
def test_row_and_columnar_predict_equal_the_in_process_translator(server, trained_model):
    expected, scores = _in_process(trained_model, 3, SENTENCES)
    row = _post(f"{server}/v1/models/tiny:predict",
                {"signature_name": "serving_default", "instances": SENTENCES})
    assert row.status_code == 200, row.text
    predictions = row.json()["predictions"]
    assert [p["translations"] for p in predictions] == expected
    # Scores are float32 written as TF Serving writes them: they read back exactly.
    assert [np.float32(p["scores"]) for p in predictions] == list(scores)
    assert predictions[2] == {"scores": 0.0, "translations": ""}
    columnar = _post(f"{server}/v1/models/tiny/versions/1:predict", {"inputs": {"text": SENTENCES}})
    assert columnar.json() == {"outputs": {"translations": expected,
                                           "scores": [p["scores"] for p in predictions]}}
    # Named instances, base64 strings and a plain columnar list are TF Serving's other forms.
    named = _post(f"{server}/v1/models/tiny:predict",
                  {"instances": [{"text": {"b64": base64.b64encode(s.encode()).decode()}} for s in SENTENCES]})
    assert [p["translations"] for p in named.json()["predictions"]] == expected
    greedy = _post(f"{server}/v1/models/greedy:predict", {"inputs": SENTENCES}).json()["outputs"]
    assert greedy["translations"] == _in_process(trained_model, 1, SENTENCES)[0]


@pytest.mark.slow
def test_translate_through_the_server_equals_translate_in_process(server, trained_model, tmp_path, capsys):
    lines = ["the red dog sees a bird", "", "a cat", "   ", "big house", "the old man runs",
             "a big red car", "the woman sees the dog", "small tree"] * 3
    source = tmp_path / "in.txt"
    source.write_bytes(("\n".join(lines) + "\n").encode() + b"the \xff dog\n")
    assert run_cli("translate", f"--model_dir={trained_model}", "--beam_size=3",
                   f"--input={source}", "--decode_batch_size=4") == 0
    local = capsys.readouterr().out.split("\n")
    assert run_cli("translate", f"--server={server}", "--served_model=tiny", f"--input={source}",
                   "--decode_batch_size=4") == 0
    captured = capsys.readouterr()
    remote = captured.out.split("\n")
    assert remote == local and len(remote) == len(lines) + 2  # one per line, then ""
    assert remote[1] == "" and remote[3] == "" and remote[0]
    assert "U+FFFD" in captured.err and ":2: empty line" in captured.err


@pytest.mark.slow
def test_n_best_through_the_server_equals_n_best_in_process(server, trained_model, tmp_path,
                                                            capsys):
    source = tmp_path / "in.txt"
    source.write_text("the red dog sees a bird\n\na cat\nbig house\n")
    assert run_cli("translate", f"--model_dir={trained_model}", "--beam_size=3", "--n_best=2",
                   f"--input={source}") == 0
    local = capsys.readouterr().out
    assert run_cli("translate", f"--server={server}", "--served_model=tiny", "--n_best=2",
                   f"--input={source}") == 0
    remote = capsys.readouterr().out
    assert remote == local and len(remote.splitlines()) == 8 and remote.startswith("0 ||| ")
    # A model exported without n_best: the server's refusal, in one line.
    assert run_cli("translate", f"--server={server}", "--served_model=greedy", "--n_best=2",
                   f"--input={source}") == 2
    assert 'signature name: \"n_best\" not found' in capsys.readouterr().err.splitlines()[-1]


def _b64(data):
    return {"b64": base64.b64encode(data).decode()}


_NAMED_AND_VALUE = "give every instance in the same form"


BAD_REQUESTS = [
    # JSON that does not parse, or is not a request
    ("tiny:predict", b'{"instances": [', 400, "JSON Parse error"),
    ("tiny:predict", b"", 400, "JSON Parse error: The document is empty"),
    ("tiny:predict", b"[1]", 400, "JSON Value: [1] Is not object"),
    ("tiny:predict", b'{"instances": ["\xff"]}', 400, "JSON Parse error: Invalid encoding in string. at offset: 16"),
    ("tiny:predict", b'{"instances": ["\xed\xa0\x80"]}', 400, "JSON Parse error: Invalid encoding in string"),
    ("tiny:predict", b'{"instances": ' + b"[" * 4000 + b"]" * 4000 + b"}", 400, "JSON Parse error: nested too deeply"),
    ("tiny:predict", b'{"instances": [' + b"1" * 5000 + b"]}", 400, "JSON Parse error: "),
    # JSON strings that are not text: a lone UTF-16 surrogate, wherever it is
    ("tiny:predict", {"instances": ["a", "b\ud800"]}, 400,
     "JSON Parse error: The surrogate pair in string is invalid: instances[1] has a lone surrogate '\\ud800'"),
    ("tiny:predict", {"inputs": {"text": ["\udc00"]}}, 400, "inputs.text[0] has a lone surrogate '\\udc00'"),
    ("tiny:predict", {"signature_name": "\ud800", "instances": ["a"]}, 400, "signature_name has a lone surrogate"),
    ("tiny:predict", {"instances": [{"t\ud800": "a"}]}, 400, "a key of instances[0] has a lone surrogate"),
    # base64
    ("tiny:predict", {"instances": [{"b64": "!!"}]}, 400, "Unable to base64 decode"),
    ("tiny:predict", {"instances": ["a", _b64(b"ok \xff\xfe")]}, 400,
     "Failed to process element: 1 of 'instances' list. Error: the {\"b64\": ...} value decodes to "
     "bytes that are not UTF-8 (byte 0xff at offset 3)"),
    ("tiny:predict", {"inputs": [_b64(b"\xc3")]}, 400, "input 'text' item 0: the {\"b64\": ...} value decodes to bytes that are not UTF-8"),
    ("tiny:predict", {"instances": [{"b64": 5}]}, 400, "is not of expected type: string"),
    # named instances ({"text": ...}) mixed with values (strings, {"b64": ...})
    ("tiny:predict", {"instances": [{"text": "a"}, _b64(b"b")]}, 400,
     "'instances' item 1 is a value (a string or {\"b64\": ...}) but item 0 is a named instance"),
    ("tiny:predict", {"instances": [{"text": "a"}, "b"]}, 400, _NAMED_AND_VALUE),
    ("tiny:predict", {"instances": ["a", {"text": "b"}]}, 400,
     "'instances' item 1 is a named instance ({\"text\": ...}) but item 0 is a value"),
    ("tiny:predict", {"instances": [_b64(b"a"), {"text": "b"}]}, 400, _NAMED_AND_VALUE),
    ("tiny:predict", {"instances": [{"txt": "a"}]}, 400, "keys must be equal to: text"),
    # the request's form
    ("tiny:predict", {"signature_name": "nope", "instances": ["a"]}, 400,
     'Serving signature name: "nope" not found in signature def'),
    ("tiny:predict", {"signature_name": 7, "instances": ["a"]}, 400, "'signature_name' key must be a string"),
    ("tiny:predict", {"instances": ["a"], "inputs": ["a"]}, 400, "expecting only one of 'inputs' or 'instances'"),
    ("tiny:predict", {"instances": "a"}, 400, "Expecting 'instances' to be an list/array"),
    ("tiny:predict", {"instances": [1]}, 400, "is not of expected type: string"),
    ("tiny:predict", {"instances": [None]}, 400, "Type: Null is not of expected type: string"),
    ("tiny:predict", {"instances": []}, 400, "No values in 'instances' array"),
    ("tiny:predict", {"inputs": "a"}, 400, "input 'text' must be a list of strings"),
    ("tiny:predict", {"inputs": {"txt": ["a"]}}, 400, "Missing named input: text in 'inputs' object."),
    ("tiny:predict", {"text": ["a"]}, 400, "Missing 'inputs' or 'instances' key"),
    # this server's limits, each naming its flag
    ("tiny:predict", {"instances": ["a"] * 9}, 400,
     "Request has 9 sentences; this server takes at most 8 per request (--max_sentences_per_request)"),
    ("tiny:predict", {"instances": ["a " * 101]}, 400,
     "Sentence 0 has 202 characters; this server takes at most 200 (--max_sentence_chars)"),
    ("tiny:predict", {"instances": ["a"], "pad": "x" * 9000}, 413,
     "Request body of 9031 bytes is over this server's limit of 8192 bytes (--max_request_bytes)"),
    # ... also far over it, where waitress refuses the body before the application sees it
    ("tiny:predict", b"x" * 200_000, 413, "over this server's limit of 8192 bytes (--max_request_bytes)"),
    # paths
    ("tiny:classify", {"instances": ["a"]}, 400, "tfnmt models answer :predict, not :classify"),
    ("tiny/labels/stable:predict", {"instances": ["a"]}, 400, "Unrecognized servable version label: stable"),
    ("tiny/versions/99999999999999999999:predict", {"instances": ["a"]}, 400, "Failed to convert version"),
    ("unknown:predict", {"instances": ["a"]}, 404, "Servable not found for request: Latest(unknown)"),
    ("tiny/versions/7:predict", {"instances": ["a"]}, 404, "Servable not found for request: Specific(tiny, 7)"),
]


@pytest.mark.slow
def test_the_prefix_signature_takes_named_instances_or_named_columns(server, trained_model):
    sentences, prefixes = ["the red dog sees a bird", "a cat", ""], ["Vogel", "", "Haus"]
    expected, scores = _in_process(trained_model, 3, sentences, prefixes)
    url = f"{server}/v1/models/tiny:predict"
    rows = _post(url, {"signature_name": "prefix", "instances": [
        {"text": text, "prefix": prefix} for text, prefix in zip(sentences, prefixes)]})
    assert rows.status_code == 200, rows.text
    assert [p["translations"] for p in rows.json()["predictions"]] == expected
    assert expected[0].startswith("Vogel") and expected[2] == "Haus"
    columns = _post(url, {"signature_name": "prefix",
                          "inputs": {"text": sentences, "prefix": prefixes}}).json()["outputs"]
    assert columns["translations"] == expected
    np.testing.assert_allclose(np.float32(columns["scores"]), scores, atol=1e-5)
    for body, message in (
            ({"signature_name": "prefix", "instances": ["a cat"]},
             "keys must be equal to: prefix,text"),
            ({"signature_name": "prefix", "inputs": {"text": ["a cat"], "prefix": []}},
             "inputs prefix,text have 0, 1 values: give each the same number")):
        answer = _post(url, body)
        assert answer.status_code == 400 and message in answer.json()["error"], answer.text


@pytest.mark.parametrize("path,body,status,message", BAD_REQUESTS,
                         ids=[f"{i}-{re.sub(r'[^a-z]+', '_', m.lower())[:40]}" for i, (_, _, _, m) in enumerate(BAD_REQUESTS)])
def test_bad_requests_get_a_4xx_and_a_json_error_naming_the_problem(server, path, body, status, message):
    response = _post(f"{server}/v1/models/{path}", body)
    assert (response.status_code, response.headers["Content-Type"]) == (status, "application/json"), response.text
    error = response.json()
    assert list(error) == ["error"] and message in error["error"], error
    # The server goes on answering.
    assert _post(f"{server}/v1/models/tiny:predict", {"instances": ["a cat"]}).status_code == 200


def test_a_malformed_http_request_gets_a_json_error_too(server):
    # waitress refuses it before the application sees it.
    import socket
    host, port = server.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(b"POST /v1/models/tiny:predict HTTP/1.1\r\nHost: x\r\n"
                           b"Content-Length: many\r\n\r\n")
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") and b"Content-Type: application/json" in head, answer
    assert b"X-Content-Type-Options: nosniff" in head, answer
    assert list(json.loads(body)) == ["error"] and "Content-Length" in json.loads(body)["error"]


def test_plain_and_b64_strings_mix_as_in_tf_serving(server):
    # TF Serving decodes each {"b64": ...} on its own, so a list may hold both forms.
    mixed = _post(f"{server}/v1/models/tiny:predict", {"instances": ["a cat", _b64("big house".encode())]})
    plain = _post(f"{server}/v1/models/tiny:predict", {"instances": ["a cat", "big house"]})
    assert mixed.status_code == 200 and mixed.json() == plain.json()


def test_unknown_model_and_version_status_are_404(server):
    for path, message in (("unknown", "Could not find any versions of model unknown"),
                          ("tiny/versions/9", "Could not find version 9 of model tiny"),
                          ("unknown/metadata", "Servable not found for request: Latest(unknown)")):
        response = requests.get(f"{server}/v1/models/{path}", timeout=30)
        assert response.status_code == 404 and message in response.json()["error"]
    malformed = requests.get(f"{server}/v1/elsewhere", timeout=30)
    assert malformed.status_code == 400 and "Malformed request: GET /v1/elsewhere" in malformed.json()["error"]


@pytest.mark.slow
def test_loopback_load_with_batching_has_no_errors(server):
    client = ServingClient(server, "tiny", retries=0)
    result = load_test(client, [s for s in SENTENCES if s], clients=4, seconds=3.0,
                       sentences_per_request=1)
    assert result["errors"] == 0, result
    assert result["requests"] >= 4 and result["latency_ms_p99"] >= result["latency_ms_p50"] > 0


@pytest.mark.slow
def test_soak_reloads_under_load_and_reports_the_servers_memory(exports, tmp_path, capsys):
    base, _ = exports
    before = sorted(os.listdir(os.path.join(base, "tiny")))
    inputs = tmp_path / "in.txt"
    inputs.write_text("\n".join(s for s in SENTENCES if s) + "\n")
    assert run_cli("bench", "--bench=soak", f"--export_dir={base}", "--served_model=tiny",
                   "--bench_seconds=12", "--bench_clients=2", "--bench_reloads=2",
                   f"--input={inputs}") == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["bench"] == "soak" and result["errors"] == 0 and result["requests"] > 0
    # Linked at 4 s and at 8 s (or once the first is done); the load waits for the second
    # (tests/bench/test_soak.py). How long they take is the bench's figure, not a test's.
    assert len(result["reload_seconds"]) == 2 and all(s >= 0 for s in result["reload_seconds"])
    assert len(result["rss_mb_per_version"]) == 3
    times = [t for t, _ in result["rss_mb"]]
    assert times == sorted(times) and times[-1] >= 12 and len(times) > 10
    sizes = [mb for _, mb in result["rss_mb"]]
    assert min(sizes) > 50 and result["peak_rss_mb"] >= max(sizes) - 1
    assert result["rss_mb_end"] == sizes[-1]
    assert result["rss_flat"] == (result["rss_growth"] <= 0.10)
    assert sorted(os.listdir(os.path.join(base, "tiny"))) == before  # the user's export untouched


def test_soak_refuses_a_server_it_cannot_read_the_memory_of(capsys):
    assert run_cli("bench", "--bench=soak", "--server=http://localhost:1",
                   "--served_model=m") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["tfnmt bench: error: --server would be ignored: `tfnmt bench` reads it only "
                   "with --bench=translate and with --server; or with --bench=serve and with --server"]


def test_idle_connections_do_not_delay_a_request(server):
    # Connections opened with nothing sent, twice waitress's default limit of 100: they took
    # every slot, and a request waited unanswered until they timed out (120 s).
    import socket
    host, port = server.rsplit("/", 1)[1].split(":")
    idle = []
    try:
        for _ in range(200):
            idle.append(socket.create_connection((host, int(port)), timeout=30))
        start = time.perf_counter()
        status = requests.get(f"{server}/v1/models/tiny", timeout=20)
        predict = _post(f"{server}/v1/models/tiny:predict", {"instances": ["a cat"]})
        elapsed = time.perf_counter() - start
    finally:
        for connection in idle:
            connection.close()
    assert (status.status_code, predict.status_code) == (200, 200)
    # A second at most each on an idle machine; more leaves room for a loaded one.
    assert elapsed < 4, elapsed


def test_a_predict_body_must_be_sent_as_json(server):
    # A browser sends text/plain, form and multipart bodies (and bodies with no type) to another
    # origin without asking first (no CORS preflight): refused, any web page could translate.
    url = f"{server}/v1/models/tiny:predict"
    body = {"instances": ["a cat"]}
    for content_type in ("text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                         "multipart/form-data; boundary=x", None, "application/json-seq",
                         "application/json; charset=latin-1"):
        response = _post(url, body, content_type)
        assert (response.status_code, response.headers["Content-Type"]) == (415, "application/json")
        error = response.json()
        assert list(error) == ["error"] and "Content-Type: application/json" in error["error"], error
        assert (repr(content_type) if content_type else "no Content-Type") in error["error"], error
    for content_type in ("application/json", "Application/JSON; charset=utf-8"):
        assert _post(url, body, content_type).status_code == 200


def test_a_request_naming_another_host_is_refused(server):
    # A DNS-rebinding page reaches 127.0.0.1 under its own name, which the Host header carries.
    port = server.rsplit(":", 1)[1]
    for host in ("evil.example", f"evil.example:{port}", f"localhost.evil.example:{port}",
                 f"127.0.0.1.nip.io:{port}", f"0.0.0.0:{port}"):
        for path in ("/v1/models/tiny", "/", "/demo/models"):
            response = requests.get(f"{server}{path}", headers={"Host": host}, timeout=30)
            assert (response.status_code, response.headers["Content-Type"]) == (403, "application/json")
            error = response.json()["error"]
            assert f"Host {host.rsplit(':', 1)[0]!r}" in error and "--rest_api_allowed_hosts" in error
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "LocalHost", "127.0.0.2"):
        assert requests.get(f"{server}/v1/models/tiny", headers={"Host": host}, timeout=30).ok, host


def test_every_answer_says_nosniff_and_the_demo_page_has_a_strict_csp(server):
    import hashlib
    for answer in (requests.get(f"{server}/v1/models/tiny", timeout=30),
                   requests.get(f"{server}/v1/models/unknown", timeout=30),
                   _post(f"{server}/v1/models/tiny:predict", b"x" * 200_000),
                   requests.get(f"{server}/", timeout=30)):
        assert answer.headers.get("X-Content-Type-Options") == "nosniff", answer.headers
    page = requests.get(f"{server}/", timeout=30)
    policy = dict(p.strip().split(" ", 1) for p in page.headers["Content-Security-Policy"].split(";"))
    assert policy["default-src"] == "'none'" and policy["connect-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'" and policy["base-uri"] == "'none'"
    # The page's inline script and style, by their hashes: no other script or style runs.
    for tag in ("script", "style"):
        (inline,) = re.findall(rf"<{tag}>(.*?)</{tag}>", page.text, re.S)
        digest = base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode()
        assert policy[f"{tag}-src"] == f"'sha256-{digest}'"


@pytest.mark.slow
def test_a_new_version_is_picked_up_without_restart(server, exports):
    base, _ = exports
    # Roll in version 2 as `tfnmt export` does: written elsewhere, then renamed into place.
    staging = os.path.join(base, "greedy", ".staging-2")
    shutil.copytree(os.path.join(base, "greedy", "1"), staging)
    os.rename(staging, os.path.join(base, "greedy", "2"))
    deadline = time.time() + 120
    while True:
        states = {s["version"]: s["state"] for s in
                  requests.get(f"{server}/v1/models/greedy", timeout=30).json()["model_version_status"]}
        if states.get("2") == "AVAILABLE" and states.get("1") == "END":
            break
        assert time.time() < deadline, states
        time.sleep(0.5)
    assert requests.get(f"{server}/v1/models/greedy/metadata", timeout=30).json()["model_spec"]["version"] == "2"
    assert _post(f"{server}/v1/models/greedy/versions/2:predict", {"instances": ["a cat"]}).status_code == 200
    assert _post(f"{server}/v1/models/greedy/versions/1:predict", {"instances": ["a cat"]}).status_code == 404


def test_translate_through_the_server_cuts_an_over_long_line_and_names_its_line(server, tmp_path, capsys):
    # The server takes at most 200 characters a sentence (--max_sentence_chars=200).
    long = " ".join(["the red dog sees a bird"] * 12)
    lines = ["a cat", "big house", "the old man runs", long, "small tree", "a big red car"]
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\n".join(lines) + "\n")
    assert run_cli("translate", f"--server={server}", "--served_model=tiny", f"--input={source}",
                   f"--output={output}", "--decode_batch_size=2") == 0
    err = capsys.readouterr().err
    assert f"{source}:4: {len(long)} characters; only the first 200 are translated" in err, err
    assert err.count("characters; only the first") == 1 and "Sentence" not in err
    translations = output.read_text().split("\n")
    assert len(translations) == len(lines) + 1 and all(translations[:-1])
    # Line 4 is translated as its first 200 characters, cut at a word boundary, would be.
    cut = long[:200].rsplit(" ", 1)[0]
    source.write_text("\n".join(lines[:3] + [cut] + lines[4:]) + "\n")
    assert run_cli("translate", f"--server={server}", "--served_model=tiny", f"--input={source}",
                   f"--output={output}", "--decode_batch_size=2") == 0
    assert output.read_text().split("\n") == translations
    assert "characters; only the first" not in capsys.readouterr().err


@pytest.mark.slow
def test_a_version_that_fails_to_load_never_takes_the_model_down(exports, tmp_path, caplog):
    base, _ = exports
    good = os.path.join(base, "greedy", "1")
    root = tmp_path / "models"
    shutil.copytree(good, root / "m" / "1")
    manager = ModelManager(export_dir=str(root))
    manager.start(0)  # polled by hand below
    app = RestApi(manager)
    try:
        def answered_by():
            status, answer = _wsgi(app, "POST", "/v1/models/m:predict", {"instances": ["a cat"]})
            assert status == 200, answer
            return _wsgi(app, "GET", "/v1/models/m/metadata")[1]["model_spec"]["version"]

        def states():
            status, answer = _wsgi(app, "GET", "/v1/models/m")
            assert status == 200, answer
            return {s["version"]: (s["state"], s["status"]["error_code"], s["status"]["error_message"])
                    for s in answer["model_version_status"]}

        assert answered_by() == "1"
        # A half-written version 2: version 1 keeps answering; 2's error is in the status.
        (root / "m" / "2").mkdir()
        (root / "m" / "2" / "saved_model.pb").write_bytes(b"")
        with caplog.at_level("INFO"):
            for _ in range(3):
                manager.poll()
        assert answered_by() == "1"
        state, code, message = states()["2"]
        assert (state, code) == ("END", "NOT_FOUND") and str(root / "m" / "2") in message, message
        assert states()["1"] == ("AVAILABLE", "OK", "")
        # ... and it is not retried while its files stay the same: one error, not one per poll.
        assert sum("version 2 failed to load" in r.getMessage() for r in caplog.records) == 1
        # A TFLite export in the same directory is not a SavedModel: ignored, with one log line.
        (root / "m" / "3").mkdir()
        (root / "m" / "3" / "model.tflite").write_bytes(b"TFL3")
        (root / "m" / "3" / "spm.model").write_bytes(b"spm")
        caplog.clear()
        with caplog.at_level("INFO"):
            for _ in range(3):
                manager.poll()
        assert answered_by() == "1" and "3" not in states()
        ignored = [r.getMessage() for r in caplog.records if "m version 3" in r.getMessage()]
        assert len(ignored) == 1 and "TFLite" in ignored[0] and "ignored" in ignored[0], ignored
        # Completing version 2 changes its files: it is retried, loads, and replaces version 1.
        os.remove(root / "m" / "2" / "saved_model.pb")
        shutil.copytree(good, root / "m" / "2", dirs_exist_ok=True)
        manager.poll()
        assert answered_by() == "2"
        assert states()["2"] == ("AVAILABLE", "OK", "") and states()["1"][0] == "END"
    finally:
        manager.close()


def test_serve_starts_with_the_last_good_version_when_the_newest_is_broken(exports, tmp_path):
    base, _ = exports
    shutil.copytree(os.path.join(base, "greedy", "1"), tmp_path / "m" / "1")
    (tmp_path / "m" / "2").mkdir()
    (tmp_path / "m" / "2" / "saved_model.pb").write_bytes(b"not a SavedModel")
    manager = ModelManager(export_dir=str(tmp_path))
    try:
        manager.start(0)
        assert manager.get("m").version == 1
        (v2, state2, code2, _), (v1, state1, _, _) = manager.status("m")
        assert (v2, state2, code2, v1, state1) == (2, "END", "DATA_LOSS", 1, "AVAILABLE")
    finally:
        manager.close()


# --- the demo page -------------------------------------------------------------------------------
def _browser():
    """Headless Chromium driven by Selenium, from the system's packages (no browser download)."""
    chromium = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))),
                    None)
    driver = shutil.which("chromedriver")
    if not (chromium and driver):
        reason = ("no Chromium and chromedriver on PATH (Debian: apt-get install chromium "
                  "chromium-driver; .ci/run installs them)")
        # CI installs them, so there a missing browser is a failure, not a silent skip.
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    from selenium import webdriver
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1100,700"):
        options.add_argument(argument)
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver))


@pytest.mark.slow
def test_the_demo_page_translates_as_you_type_with_every_served_model(server, trained_model):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    sentences = ["the red dog sees a bird", "a cat"]
    expected = {"tiny": _in_process(trained_model, 3, sentences)[0],
                "greedy": _in_process(trained_model, 1, sentences)[0]}
    browser = _browser()
    try:
        browser.get(f"{server}/")
        wait = WebDriverWait(browser, 60)
        wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "div.model")) == 2)
        browser.find_element(By.ID, "source").send_keys("\n".join(sentences))
        # The page's style applies under its Content-Security-Policy (as its script does: it
        # translates).
        assert browser.find_element(By.ID, "columns").value_of_css_property("display") == "flex"

        def shown(b):
            columns = {c.get_attribute("data-model"): c for c in b.find_elements(By.CSS_SELECTOR, "div.model")}
            texts = {name: [li.get_attribute("textContent")
                            for li in c.find_elements(By.CSS_SELECTOR, "li.translation")]
                     for name, c in columns.items()}
            return texts if all(len(t) == len(sentences) for t in texts.values()) else None

        assert wait.until(shown) == expected
        for column in browser.find_elements(By.CSS_SELECTOR, "div.model"):
            name = column.get_attribute("data-model")
            newest = requests.get(f"{server}/v1/models/{name}", timeout=30).json()["model_version_status"][0]
            title = column.find_element(By.TAG_NAME, "h2").text
            assert re.fullmatch(rf"{name} \(version {newest['version']}\) \d+ ms", title), title
        # A model exported without an alignments signature offers no heatmap.
        assert not browser.find_elements(By.CSS_SELECTOR, "li.pickable")
        # A start typed for the first sentence: the model with a prefix signature completes
        # it, the other says it has none and translates as before.
        # (Not the start the model chooses itself: the page's answer must be the prefix's.)
        browser.find_element(By.ID, "prefix").send_keys("Katze ")
        completed = _in_process(trained_model, 3, sentences, ["Katze ", ""])[0]
        assert completed[0].startswith("Katze ") and completed[0] != expected["tiny"][0]
        assert completed[1] == expected["tiny"][1]
        def completing(b):
            texts = shown(b)
            return texts if texts and texts["tiny"] == completed else None

        assert wait.until(completing) == {"tiny": completed, "greedy": expected["greedy"]}
        tiny = browser.find_element(By.CSS_SELECTOR, 'div.model[data-model="tiny"]')
        assert tiny.find_element(By.CSS_SELECTOR, "li .completion").get_attribute(
            "textContent") == completed[0][len("Katze "):]
        greedy = browser.find_element(By.CSS_SELECTOR, 'div.model[data-model="greedy"]')
        assert "export with --prefix" in greedy.find_element(By.CSS_SELECTOR, ".note").text
    finally:
        browser.quit()


@contextlib.contextmanager
def _served_in_process(export_dir, batching):
    """The base URL of `tfnmt serve --export_dir=EXPORT_DIR --rest_api_port=0` (with `batching`)
    run in a thread of this process, from the parts cli/serve.py's run() puts together."""
    manager = ModelManager(export_dir=export_dir, batching=batching)
    manager.start(0)
    serve = ServeOptions(rest_api_port=0)
    try:
        server = server_lib.create(RestApi(manager, serve), serve)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            yield f"http://{serve.rest_api_host}:{server.effective_port}"
        finally:
            server_lib.shutdown(server)
            thread.join(30)
            assert not thread.is_alive()
    finally:
        manager.close()


@pytest.mark.slow
def test_an_alignments_export_is_served_per_instance_and_the_demo_page_draws_its_heatmap(
        trained_model, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    sentences = ["the red dog sees a bird", "a cat"]
    base = str(tmp_path / "exports")
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={base}",
                   "--beam_size=3", "--alignments=soft", "--export_name=aligned") == 0
    _, model, source_vocab, target_vocab = model_dir_lib.load(trained_model)
    checkpoints.restore_model(model, checkpoints.resolve(trained_model))
    translator = Translator(model, source_vocab, target_vocab,
                            DecodingOptions(beam_size=3, alignments="soft"))
    expected = translator.alignments_signature(tf.constant(sentences))
    # Served in this process, as `tfnmt serve --export_dir=BASE --rest_api_port=0
    # --max_batch_size=1` serves it (cli/serve.py: a ModelManager, RestApi and waitress server):
    # the `server` fixture's child process already shows `tfnmt serve` starts as a process of its
    # own; a second one would only import TensorFlow again (~10 s).
    with _served_in_process(base, BatchingOptions(max_batch_size=1)) as url:
        assert requests.get(f"{url}/demo/models", timeout=30).json()["models"][0]["alignments"]
        # Row format, as TF Serving answers: each instance's tokens [S], [T] and attention
        # [T][S] (the request's rows padded alike, here across two batches of one).
        answer = _post(f"{url}/v1/models/aligned:predict",
                       {"signature_name": "alignments", "instances": sentences}).json()
        rows = answer["predictions"]
        for i, row in enumerate(rows):
            assert row["translations"] == expected["translations"][i].numpy().decode()
            assert row["source_tokens"] == [t.decode() for t in expected["source_tokens"][i].numpy()]
            assert row["target_tokens"] == [t.decode() for t in expected["target_tokens"][i].numpy()]
            np.testing.assert_allclose(row["attention"], expected["attention"][i].numpy(), atol=1e-5)
        alone = _post(f"{url}/v1/models/aligned:predict",
                      {"signature_name": "alignments", "instances": sentences[:1]}).json()
        source, target = alone["predictions"][0]["source_tokens"], alone["predictions"][0]["target_tokens"]
        assert len(source) == 7 and target and all(target)  # six pieces and </s>
        browser = _browser()
        try:
            browser.get(f"{url}/")
            wait = WebDriverWait(browser, 60)
            wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "div.model"))
            browser.find_element(By.ID, "source").send_keys(sentences[0])
            wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "li.pickable"))[0].click()
            cells = wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "table.heatmap td.cell"))
            assert len(cells) == len(source) * len(target)
            heads = browser.find_elements(By.CSS_SELECTOR, "table.heatmap thead th")
            assert [h.get_attribute("textContent") for h in heads][1:] == source
            # README's picture of the page: TFNMT_DEMO_SCREENSHOT=$PWD/docs/demo.png
            shot = os.environ.get("TFNMT_DEMO_SCREENSHOT") or str(tmp_path / "demo.png")
            assert browser.save_screenshot(shot)
            assert open(shot, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
        finally:
            browser.quit()


@pytest.mark.slow
def test_the_demo_page_lists_the_served_models_and_can_be_turned_off(exports):
    base, _ = exports
    manager = ModelManager(export_dir=base)
    manager.start(0)
    try:
        app = RestApi(manager)
        status, answer = _wsgi(app, "GET", "/demo/models")
        assert status == 200 and [m["name"] for m in answer["models"]] == ["greedy", "tiny"]
        for model in answer["models"]:  # what the REST API says of the newest version
            metadata = _wsgi(app, "GET", f"/v1/models/{model['name']}/metadata")[1]
            signatures = metadata["metadata"]["signature_def"]["signature_def"]
            assert model == {"name": model["name"], "version": int(metadata["model_spec"]["version"]),
                             "signatures": sorted(n for n in signatures if not n.startswith("__")),
                             "alignments": False, "prefix": model["name"] == "tiny"}
        status, answer = _wsgi(RestApi(manager, ServeOptions(demo=False)), "GET", "/demo/models")
        assert status == 404 and "the REST API is under /v1/models/" in answer["error"]
    finally:
        manager.close()
    page = {}
    body = RestApi(manager)({"REQUEST_METHOD": "GET", "PATH_INFO": "/"},
                            lambda status, headers: page.update(status=status, headers=dict(headers)))
    assert page["status"] == "200 OK" and page["headers"]["Content-Type"].startswith("text/html")
    html = b"".join(body).decode()
    # It works offline: nothing is loaded from another host.
    assert "/demo/models" in html and not re.search(r"(src|href)=\"?(https?:)?//", html)


def test_an_unloaded_version_is_unreferenced_when_its_memory_is_handed_back(exports, tmp_path,
                                                                             monkeypatch):
    import weakref
    from tfnmt import runtime
    base, _ = exports
    shutil.copytree(os.path.join(base, "greedy", "1"), tmp_path / "m" / "1")
    manager = ModelManager(export_dir=str(tmp_path))
    freed = []
    try:
        manager.start(0)
        old = weakref.ref(manager.get("m"))
        # glibc can hand back only what nothing references any more.
        monkeypatch.setattr(runtime, "return_freed_memory", lambda: freed.append(old() is None))
        shutil.copytree(os.path.join(base, "greedy", "1"), tmp_path / "m" / "2")
        manager.poll()
        assert manager.get("m").version == 2 and freed == [True]
    finally:
        manager.close()
