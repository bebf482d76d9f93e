"""Errors of the REST API: a canonical status code (as in TF Serving's C++ Status) and its
message. The HTTP status of each code is TF Serving's (model_servers/http_server.cc)."""

import re

HTTP_STATUS = {
    "INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "OUT_OF_RANGE": 400,
    "NOT_FOUND": 404, "ALREADY_EXISTS": 409, "ABORTED": 409, "PERMISSION_DENIED": 403,
    "UNAUTHENTICATED": 401, "RESOURCE_EXHAUSTED": 429, "CANCELLED": 499, "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504, "UNKNOWN": 500, "INTERNAL": 500, "DATA_LOSS": 500,
}


class ServingError(Exception):
    def __init__(self, code, message, http_status=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.http_status = http_status or HTTP_STATUS[code]


def invalid_argument(message):
    return ServingError("INVALID_ARGUMENT", message)


def not_found(message):
    return ServingError("NOT_FOUND", message)


def unavailable(message):
    return ServingError("UNAVAILABLE", message)


def request_too_large(length, limit):
    # TF Serving has no body limit of its own, so no code of its own for it: HTTP's 413.
    size = f" of {length} bytes" if length else ""
    return ServingError("INVALID_ARGUMENT", f"Request body{size} is over this server's limit of "
                        f"{limit} bytes (--max_request_bytes)", http_status=413)


def sentence_too_long(index, length, limit):
    return invalid_argument(f"Sentence {index} has {length} characters; this server takes at most "
                            f"{limit} (--max_sentence_chars)")


def sentence_limit(message):
    """The limit a `sentence_too_long` message states, or None: how `tfnmt translate --server`
    learns the server's --max_sentence_chars (TF Serving's API has no place to publish it)."""
    match = re.search(r"this server takes at most (\d+) \(--max_sentence_chars\)", message)
    return int(match.group(1)) if match else None
