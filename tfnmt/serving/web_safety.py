"""What a web page may not do with a server on this machine (TF Serving does not consider it):
a :predict body not sent as application/json gets 415 (`check_json_body`), a request whose Host
header is not this server's gets 403 (`host_allowed`), and the demo page has a
Content-Security-Policy allowing its own inline script and style only (`demo_page_policy`).
"""

import base64
import hashlib
import ipaddress
import re

from tfnmt.serving.status import ServingError

_HOST = re.compile(r"\[([^\]]*)\](?::\d*)?|([^:\[\]]*)(?::\d*)?")


def check_json_body(environ):
    """415 unless the body is sent as application/json (UTF-8, JSON's only encoding). A browser
    sends text/plain, form and multipart bodies, or a body of no type, to another origin without
    asking first (no CORS preflight): without this any web page could use the server."""
    given = environ.get("CONTENT_TYPE", "").strip()
    media_type, _, parameters = given.partition(";")
    charset = re.search(r"charset\s*=\s*\"?([^\";\s]*)", parameters, re.IGNORECASE)
    if media_type.strip().lower() == "application/json" and (
            not charset or charset.group(1).lower() in ("utf-8", "utf8")):
        return
    # TF Serving has no such check, so no code of its own for it: HTTP's 415.
    raise ServingError("INVALID_ARGUMENT", f"{'Content-Type ' + repr(given) if given else 'no Content-Type'}"
                       ": a request body must be JSON sent with Content-Type: application/json",
                       http_status=415)


def host_name(header):
    """The host of a Host header, lower-case, without its port and an IPv6 address's brackets;
    None if it is no host."""
    match = _HOST.fullmatch(header.strip().lower())
    return match and (match.group(1) if match.group(1) is not None else match.group(2)).rstrip(".")


def host_allowed(host, bound, names):
    """Whether a request for `host` (a `host_name`) is answered by a server listening on
    `bound` that also answers for `names`. DNS rebinding, which lets a web page read this server's
    answers, needs a host name of the attacker's, so names are checked against a list (as
    Jupyter does) and addresses are not: any loopback address, the listening address, and,
    listening on every interface, every address."""
    if host is None:
        return False
    if "*" in names or host in names or host == "localhost" or host == bound:
        return True
    try:
        if ipaddress.ip_address(host).is_loopback:
            return True
    except ValueError:
        return False
    try:
        return ipaddress.ip_address(bound).is_unspecified
    except ValueError:  # listening on a host name's addresses
        return False


def _inline_hashes(page, tag):
    return " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()}'"
                    for text in re.findall(rf"<{tag}>(.*?)</{tag}>", page, re.S))


def demo_page_policy(page):
    """The demo page's Content-Security-Policy: its own inline script and style (by their
    hashes, so an injected one would not run), requests to this server only, nothing else."""
    return (f"default-src 'none'; script-src {_inline_hashes(page, 'script')}; "
            f"style-src {_inline_hashes(page, 'style')}; connect-src 'self'; base-uri 'none'; "
            "form-action 'none'; frame-ancestors 'none'")
