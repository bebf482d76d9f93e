"""Numbered version directories DIR/NAME/VERSION, written atomically (TF Serving's layout, also
used for TFLite exports so that every exported artefact is found the same way)."""

import os
import shutil

from tfnmt.errors import ConfigError, cannot_write, write_errors


def next_version(base):
    versions = [int(d) for d in os.listdir(base) if d.isdigit()] if os.path.isdir(base) else []
    return max(versions, default=0) + 1


def write_version(export_dir, name, version, write):
    """Calls write(staging_dir), then renames it to export_dir/name/version; returns that path.
    If `write` raises, nothing is left behind; a write that fails (a full disk, a file in the
    way) is reported in one line naming the version."""
    base = os.path.join(export_dir, name)
    version = version or next_version(base)
    final = os.path.join(base, str(version))
    if os.path.exists(final):
        raise ConfigError(f"{final} exists already: choose another --export_version")
    # TF Serving polls for numeric version folders; write elsewhere and rename, so it never
    # loads a half-written model.
    staging = os.path.join(base, f".staging-{version}")
    try:
        os.makedirs(base, exist_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
    except write_errors() as e:
        raise cannot_write(final, e, "free some space or choose another --export_dir") from None
    return write_atomically(final, staging, write, "--export_dir")


def write_atomically(final, staging, write, flag):
    """Calls write(staging), then renames staging to `final` (an empty directory there is
    replaced). If anything fails nothing is left behind; a failed write (a full disk, a file in
    the way) is one line naming `final` and `flag`."""
    try:
        try:
            write(staging)
            if os.path.isdir(final):
                os.rmdir(final)  # only an empty one: os.rmdir refuses the others
            os.rename(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    except write_errors() as e:
        raise cannot_write(final, e, f"free some space or choose another {flag}") from None
    return final
