"""Which Host names `tfnmt serve` answers (serving/web_safety.py), in this process."""

from helpers.serving import wsgi
from tfnmt.serving.options import ServeOptions
from tfnmt.serving.rest import RestApi


class _NoModels:
    def names(self):
        return []


def test_the_host_allow_list_takes_names_from_a_flag():
    def status(options, host):
        return wsgi(RestApi(_NoModels(), options), "GET", "/demo/models", HTTP_HOST=host)[0]
    named = ServeOptions(rest_api_allowed_hosts="nmt.example, Other.Example")
    assert [status(named, h) for h in ("nmt.example:8501", "other.example", "evil.example",
                                       "localhost:8501", "[::1]")] == [200, 200, 403, 200, 200]
    # Listening on every interface, clients come by any of the machine's addresses; a name
    # still has to be listed.
    everywhere = ServeOptions(rest_api_host="0.0.0.0")
    assert [status(everywhere, h) for h in ("192.168.1.5:8501", "[fe80::1]", "nmt.example",
                                            "0.0.0.0")] == [200, 200, 403, 200]
    anything = ServeOptions(rest_api_allowed_hosts="*")
    assert status(anything, "nmt.example") == 200
    # A request without a Host header (HTTP/1.0) comes from no browser.
    assert wsgi(RestApi(_NoModels()), "GET", "/demo/models")[0] == 200
