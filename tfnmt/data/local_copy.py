"""What the project TFDS builders (Multi30k, IWSLT14) share to use a local copy of their data.

* :class:`LocalCopyBuilder`, a mixin that finds the folder with a local copy (a named
  manual dir, the builder's ``ENV_VAR`` or TFDS's default manual folder) and otherwise
  probes the host and downloads, turning any failure into the builder's offline error;
* :func:`reachable`, that probe; :func:`offline_error`, the wording of that error;
* :func:`split_lines`, the strict line splitting of the text files both builders read.
"""

from __future__ import annotations

import os
import socket
import sys
import urllib.request
from pathlib import Path
from typing import Callable

import tensorflow_datasets as tfds
from etils import epath

from tfnmt.errors import DataError

__all__ = ["LocalCopyBuilder", "offline_error", "reachable", "split_lines"]


def reachable(host: str, port: int = 443, timeout: float = 5.0) -> bool:
    """Whether a TCP connection to host can be opened (always True behind a proxy).

    TFDS retries a failed request ten times with exponential backoff, which keeps an
    offline machine waiting for about 200 s before it reports anything.
    """
    if urllib.request.getproxies():
        return True
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def offline_error(what: str, host: str, reason: str, local_files: str, env_var: str) -> DataError:
    """The error for a download of what from host that failed for reason.

    Whatever the reason, the remedy is the same, so the message names it: the
    local_files to put in a folder and the two ways to point the builder at it.
    """
    return DataError(
        f"could not download {what} from {host} ({reason}; no network?): put {local_files} "
        f"in a folder and pass --manual_dir=DIR (or set {env_var})"
    )


def split_lines(data: bytes, path: str | os.PathLike) -> list[str]:
    """The lines of data, the UTF-8 bytes of path (named in errors), as they are.

    Only ``\\n`` ends a line: Python's universal newlines or str.splitlines() would also
    split on a stray ``\\r`` or U+2028 inside a sentence and shift one language against
    the other.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line_no = data.count(b"\n", 0, e.start) + 1
        raise DataError(f"{path} line {line_no} is not valid UTF-8: {e.reason}") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


class LocalCopyBuilder:
    """Mixin, listed before ``tfds.core.GeneratorBasedBuilder``, for builders that read a
    local copy of their data when there is one and download it otherwise.

    A subclass sets ``ENV_VAR``, the environment variable that may name the local folder.
    """

    ENV_VAR: str

    _manual_dir_arg: str | None = None

    def __init_subclass__(cls, **kwargs):
        # TFDS 4.9.10 derives code_path through `importlib_resources`, which it needs but
        # does not install on Python >= 3.9 (tensorflow/datasets#11212); naming the file
        # directly avoids that import. TFDS reads checksums.tsv and metadata next to it.
        if "code_path" not in cls.__dict__:
            cls.code_path = epath.Path(sys.modules[cls.__module__].__file__)
        super().__init_subclass__(**kwargs)

    def download_and_prepare(self, *, download_config=None, **kwargs) -> None:
        # The download manager only knows TFDS's default manual folder, so remember
        # whether the caller named one: a named folder must hold the data.
        self._manual_dir_arg = os.fspath(download_config.manual_dir) if (
            download_config is not None and download_config.manual_dir
        ) else None
        try:
            super().download_and_prepare(download_config=download_config, **kwargs)
        finally:
            self._manual_dir_arg = None

    def _local_folder(self, dl_manager: tfds.download.DownloadManager) -> Path | None:
        """The folder named by the caller or ``ENV_VAR``, else TFDS's default manual
        folder when it is not empty, else None (download)."""
        named = self._manual_dir_arg or os.environ.get(self.ENV_VAR) or None
        if named:
            return Path(named).expanduser()
        try:
            return Path(os.fspath(dl_manager.manual_dir))
        except AssertionError:  # TFDS's way of saying the default folder is absent or empty
            return None

    @staticmethod
    def _download(dl_manager: tfds.download.DownloadManager, host: str, urls,
                  make_error: Callable[[str], DataError]):
        """``dl_manager.download(urls)`` as local Paths (one, or a dict like urls).

        Probes host first, so that an offline machine fails at once; make_error, the
        builder's factory, turns the reason into its DataError that says how to use a
        local copy.
        """
        if not reachable(host):
            raise make_error(f"cannot connect to {host}")
        try:
            got = dl_manager.download(urls)
            if isinstance(got, dict):
                return {name: Path(os.fspath(p)) for name, p in got.items()}
            return Path(os.fspath(got))
        except Exception as e:  # any failure means the same remedy: a local copy
            raise make_error(type(e).__name__) from e
