"""The JSON files tfnmt keeps (config.json, best/best.json, an experiment's records, distill's
settings): written whole or not at all, read back with one line for a damaged file.

A kill or a full disk mid-write leaves the previous file, never half of one: the value goes to
PATH.tmpPID first, which is renamed over PATH (a rename within a directory is atomic). A reader
that finds a truncated or garbled file anyway (a copy cut short, disk trouble) gets a
ConfigError naming it, which each caller turns into a warning or one error line.
"""

import json
import os

from tfnmt.errors import ConfigError


def write(path, value, **dump_args):
    """Writes `value` as JSON to `path` atomically; `dump_args` go to json.dump (indent...)."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(value, f, **dump_args)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def read(path, default=None):
    """The value in `path`, `default` if there is no such file; ConfigError('cannot read PATH:
    WHY') if it cannot be read or parsed."""
    if not os.path.isfile(path):
        return default
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        reason = "empty" if os.path.getsize(path) == 0 else f"not JSON ({str(e).splitlines()[0]})"
        raise ConfigError(f"cannot read {path}: {reason}") from None
