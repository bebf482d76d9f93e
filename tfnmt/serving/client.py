"""Client of a TF Serving (or `tfnmt serve`) REST endpoint.

`RemoteTranslator` puts a served model behind the Translator interface, so `tfnmt translate`,
`evaluate`, `score`, `distill` and `bench --bench=translate` take `--server=URL
--served_model=NAME` like they take `--saved_model`. Requests use the columnar format with the
inputs as a plain list (TF Serving feeds it to the signature's only input, whatever its name).
Connection errors and 503 (model loading, batching queue full) are retried with exponential
back-off, a bounded number of times, saying so once on stderr; any other error stops with the
server's message. A sentence over `tfnmt serve`'s --max_sentence_chars is cut to it, with a
warning naming its line. Target prefixes and scores are refused before any is sent when the
model's metadata lists no `prefix` or `score` signature.
"""

import json
import threading
import time

import numpy as np
import requests
from absl import logging

from tfnmt.decoding.backend import Backend, no_score_signature
from tfnmt.errors import ConfigError, UserError
from tfnmt.serving.options import ClientOptions
from tfnmt.serving.status import sentence_limit

_MAX_BACKOFF = 8.0


class ServerError(UserError):
    pass


class SentenceTooLong(ServerError):
    """The server refused a sentence over its --max_sentence_chars, `limit`."""

    def __init__(self, message, limit):
        super().__init__(message)
        self.limit = limit


def cut(text, limit):
    """`text` cut to at most `limit` characters, at a space where there is one, so that no word
    is translated as a fragment."""
    head = text[:limit]
    if not text[limit:limit + 1].isspace():
        before, _, _ = head.rpartition(" ")
        if before.strip():
            head = before
    return head.rstrip()


class ServingClient:
    def __init__(self, url, model, version=ClientOptions.model_version,
                 retries=ClientOptions.server_retries, timeout=ClientOptions.server_timeout,
                 backoff=0.5):
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"--server must be an http:// or https:// URL, not {url!r}")
        if not model:
            raise ConfigError("--server needs --served_model, the served model's name")
        self.base = url.rstrip("/")
        self.model = model
        self.version = version
        self.retries = retries
        self.timeout = timeout
        self.backoff = backoff
        self._local = threading.local()
        self._retrying = threading.Event()  # set while the server is unreachable

    @property
    def model_url(self):
        return f"{self.base}/v1/models/{self.model}" + (f"/versions/{self.version}" if self.version else "")

    def _session(self):
        # A keep-alive connection per thread (requests.Session is not thread-safe).
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def _request(self, method, url, body=None):
        failure = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(self.backoff * 2 ** (attempt - 1), _MAX_BACKOFF))
            try:
                response = self._session().request(
                    method, url, data=body, timeout=self.timeout,
                    headers={"Content-Type": "application/json"} if body is not None else None)
            except requests.ConnectionError as e:
                failure = f"cannot connect ({type(e).__name__})"
                self._say_retrying(url, failure, attempt)
                continue
            except requests.Timeout:
                raise ServerError(f"{url}: no answer within {self.timeout:g}s (--server_timeout)") from None
            if response.status_code == 503:
                failure = f"503 {_error_message(response)}"
                self._say_retrying(url, failure, attempt)
                continue
            self._retrying.clear()
            if response.status_code != 200:
                message = _error_message(response)
                limit = sentence_limit(message) if response.status_code == 400 else None
                if limit:
                    raise SentenceTooLong(f"{url}: 400 {message}", limit)
                raise ServerError(f"{url}: {response.status_code} {message}")
            try:
                return response.json()
            except ValueError:
                raise ServerError(f"{url}: the answer is not JSON: {response.text[:200]!r}") from None
        raise ServerError(f"{url}: {failure}, after {self.retries} retries (--server_retries)")

    def _say_retrying(self, url, failure, attempt):
        # Once while the server stays unreachable, not once per attempt.
        if attempt < self.retries and not self._retrying.is_set():
            self._retrying.set()
            wait = sum(min(self.backoff * 2 ** k, _MAX_BACKOFF) for k in range(self.retries))
            logging.warning("%s: %s; retrying up to %d times within %.1f s (--server_retries)",
                            url, failure, self.retries, wait)

    def predict(self, texts, signature=None):
        """{output name: list} for a list of input strings (or {input name: list of strings},
        for a signature of several inputs), from the model's default signature or
        `signature`."""
        inputs = dict(texts) if isinstance(texts, dict) else list(texts)
        request = {"inputs": inputs, **({"signature_name": signature} if signature else {})}
        body = json.dumps(request, ensure_ascii=False).encode("utf-8")
        outputs = self._request("POST", self.model_url + ":predict", body)["outputs"]
        if not isinstance(outputs, dict):
            raise ServerError(f"{self.model_url}: expected named outputs, got {str(outputs)[:100]}")
        return outputs

    def status(self):
        return self._request("GET", self.model_url)

    def metadata(self):
        return self._request("GET", self.model_url + "/metadata")


def _error_message(response):
    try:
        return str(response.json()["error"])
    except (ValueError, KeyError, TypeError):
        return response.text.strip()[:300] or response.reason


class RemoteTranslator(Backend):
    """A served model as a translation backend (decoding/backend.py); `translate_n_best` asks
    for its `n_best` signature.

    A sentence over the server's --max_sentence_chars is cut to it, as a checkpoint or an export
    cuts one over --max_input_length subwords; the limit is learnt from the first refusal."""

    config = None

    def __init__(self, client):
        self.client = client
        self.max_chars = None  # the server's --max_sentence_chars, once it has refused a sentence
        # Where the sentences come from, to name their lines: (where, sentences, first line).
        self._source = ("input", [], 1)
        self._warned = set()
        self._signatures = None

    def prepare(self, sentences, where, first_line=1):
        """Warnings about these sentences name them WHERE:LINE (their line in the input, the
        first one's `first_line`); the server's limit is learnt from its first refusal."""
        self._source = (where, list(sentences), first_line)
        if self.max_chars is not None:
            self._name_long_lines()

    def _learn_limit(self, limit):
        self.max_chars = limit
        self._name_long_lines()

    def _name_long_lines(self):
        where, sentences, first_line = self._source
        for number, sentence in enumerate(sentences, start=first_line):
            if len(sentence) > self.max_chars and sentence not in self._warned:
                self._warned.add(sentence)
                logging.warning("%s:%d: %d characters; only the first %d are translated (the "
                                "server's --max_sentence_chars)", where, number, len(sentence),
                                self.max_chars)

    def _fit(self, texts):
        if self.max_chars is None:
            return texts
        for text in texts:
            if len(text) > self.max_chars and text not in self._warned:  # not among the named lines
                self._warned.add(text)
                logging.warning("%s: a sentence of %d characters; only the first %d are translated "
                                "(the server's --max_sentence_chars)", self._source[0], len(text),
                                self.max_chars)
        return [cut(t, self.max_chars) if len(t) > self.max_chars else t for t in texts]

    def translate(self, text):
        return self._predict(text)

    def check_prefix(self):
        """Refuses target prefixes, before any is sent, where the served model's metadata shows
        no `prefix` signature (TF Serving would refuse each request)."""
        if "prefix" not in self.signatures():
            raise ConfigError(f"target prefix: {self.client.model_url} has no `prefix` "
                              "signature; export it with --prefix")

    def translate_prefix(self, text, prefix):
        return self._predict(text, "prefix", prefix)

    def check_scorable(self, sentences, where):
        """Refuses scoring, before anything is sent, where the served model's metadata shows
        no `score` signature."""
        if "score" not in self.signatures():
            raise no_score_signature(self.client.model_url)

    def signatures(self):
        """The served model's signature names, from its metadata (GET .../metadata, as TF
        Serving and `tfnmt serve` give it), asked once."""
        if self._signatures is None:
            metadata = self.client.metadata()
            try:
                self._signatures = set(metadata["metadata"]["signature_def"]["signature_def"])
            except (KeyError, TypeError):
                raise ServerError(f"{self.client.model_url}/metadata: not a model's metadata: "
                                  f"{str(metadata)[:100]}") from None
        return self._signatures

    def score_signature(self, text, target):
        """The served model's `score` signature (an export made with --score): log_prob,
        normalized float32 [B] and target_tokens (bytes, "" after a target's pieces) [B, T]."""
        outputs = self.client.predict({"text": _strings(text), "target": _strings(target)},
                                      "score")
        if any(key not in outputs for key in ("log_prob", "normalized", "target_tokens")):
            raise ServerError(f"{self.client.model_url}: its score signature gives "
                              f"{sorted(outputs)}, not a tfnmt score")
        return {"log_prob": np.asarray(outputs["log_prob"], np.float32),
                "normalized": np.asarray(outputs["normalized"], np.float32),
                "target_tokens": [[token.encode("utf-8") for token in row]
                                  for row in outputs["target_tokens"]]}

    def translate_n_best(self, text, n):
        out = self._predict(text, "n_best")
        if len(out["translations"].shape) != 2 or out["translations"].shape[1] < n:
            raise ServerError(f"{self.client.model_url}: its n_best signature gives fewer than "
                              f"--n_best={n} hypotheses")
        return {key: value[:, :n] for key, value in out.items()}

    def _predict(self, text, signature=None, prefix=None):
        import tensorflow as tf
        texts = _strings(text)

        def ask():
            if prefix is None:
                return self.client.predict(self._fit(texts), signature)
            return self.client.predict({"text": self._fit(texts), "prefix": _strings(prefix)},
                                       signature)

        try:
            outputs = ask()
        except SentenceTooLong as e:
            if self.max_chars is not None and e.limit >= self.max_chars:
                raise
            self._learn_limit(e.limit)
            outputs = ask()
        translations, scores = outputs.get("translations"), outputs.get("scores")
        if translations is None or len(translations) != len(texts):
            raise ServerError(f"{self.client.model_url}: not a tfnmt translation model "
                              f"(outputs {sorted(outputs)})")
        scores = scores if scores is not None else np.zeros(np.shape(translations)).tolist()
        return {"translations": tf.constant(translations, tf.string),
                "scores": tf.constant(scores, tf.float32)}


def _strings(text):
    return [t.decode("utf-8") for t in text.numpy()] if hasattr(text, "numpy") else list(text)


def load_test(client, sentences, *, clients, seconds, sentences_per_request, expected=None,
              hold=None):
    """`clients` threads send requests of `sentences_per_request` sentences, back to back, for
    `seconds`, and after that while `hold` (a threading.Event) is set. Returns counts, requests/s
    and latency percentiles; with `expected` ({sentence: translation}) also how many answers
    differed from it."""
    deadline = time.perf_counter() + seconds
    hold = hold or threading.Event()
    latencies, errors, mismatches = [], [], [0]
    lock = threading.Lock()

    def worker(index):
        position = index * sentences_per_request
        while time.perf_counter() < deadline or hold.is_set():
            batch = [sentences[(position + k) % len(sentences)] for k in range(sentences_per_request)]
            position += clients * sentences_per_request
            start = time.perf_counter()
            try:
                outputs = client.predict(batch)
            except UserError as e:
                with lock:
                    errors.append(str(e))
                continue
            elapsed = time.perf_counter() - start
            wrong = 0
            if expected is not None:
                wrong = sum(expected[s] != t for s, t in zip(batch, outputs["translations"]))
            with lock:
                latencies.append(elapsed)
                mismatches[0] += wrong

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    ms = 1000 * np.asarray(latencies or [float("nan")])
    result = {"clients": clients, "seconds": round(elapsed, 1), "requests": len(latencies),
              "errors": len(errors), "sentences_per_request": sentences_per_request,
              "requests_per_second": round(len(latencies) / elapsed, 2),
              "sentences_per_second": round(len(latencies) * sentences_per_request / elapsed, 2),
              "latency_ms_p50": round(float(np.percentile(ms, 50)), 1),
              "latency_ms_p90": round(float(np.percentile(ms, 90)), 1),
              "latency_ms_p99": round(float(np.percentile(ms, 99)), 1)}
    if expected is not None:
        result["mismatches"] = mismatches[0]
    if errors:
        result["first_error"] = errors[0]
    return result
