"""What the serving tests share: a request to the REST application in this process."""

import io
import json


def wsgi(app, method, path, body=None, **environ):
    """(HTTP status, JSON answer) of one request to the REST application, in this process."""
    data = json.dumps(body).encode() if body is not None else b""
    answer = {}
    out = app({"REQUEST_METHOD": method, "PATH_INFO": path, "CONTENT_LENGTH": str(len(data)),
               "CONTENT_TYPE": "application/json", "wsgi.input": io.BytesIO(data), **environ},
              lambda status, headers: answer.update(status=status))
    return int(answer["status"].split()[0]), json.loads(b"".join(out))
