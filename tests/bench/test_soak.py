"""bench/soak.py's schedule of reloads, against a fake server whose versions load slowly (the
soak itself, against `tfnmt serve`: tests/serving/test_serving.py)."""

import threading
import time
import types

import pytest

from tfnmt.bench import soak
from tfnmt.serving.client import load_test


class SlowServer:
    """Answers at once; version N (N >= 2) replaces N - 1 `load_seconds` after its directory
    appears."""
    model = "m"

    def __init__(self, base, load_seconds):
        self.base, self.load_seconds, self.linked = base, load_seconds, {}
        self.lock = threading.Lock()

    def predict(self, batch):
        time.sleep(0.01)
        return {"translations": list(batch)}

    def status(self):
        now = time.perf_counter()
        versions = {1: "AVAILABLE"}
        for path in sorted((self.base / self.model).iterdir()):
            version = int(path.name)
            with self.lock:
                self.linked.setdefault(version, now)
            if version > 1 and now - self.linked[version] >= self.load_seconds:
                versions[version], versions[version - 1] = "AVAILABLE", "END"
        return {"model_version_status": [{"version": str(v), "state": s}
                                         for v, s in versions.items()]}


def _soak(tmp_path, seconds, reloads, load_seconds):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "1").mkdir()
    bench = types.SimpleNamespace(bench_seconds=seconds, bench_clients=2,
                                  bench_request_sentences=1, bench_reloads=reloads)
    return soak._load(bench, SlowServer(tmp_path, load_seconds), load_test, ["a", "b"],
                      pid=0, base=str(tmp_path), export_path=str(tmp_path / "m" / "1"))


def test_the_load_waits_for_a_reload_that_outlasts_it_and_the_next_starts_when_one_lands(tmp_path):
    # Versions 2 and 3 are due at 0.67 s and 1.33 s of a 2 s load, and each takes 1.5 s: 2 lands
    # at about 2.2 s, after the load would have ended (the old schedule counted neither), and 3
    # is linked then.
    found, samples, reloads = _soak(tmp_path, seconds=2.0, reloads=2, load_seconds=1.5)
    assert [linked for linked, _ in reloads][0] >= 2 / 3 and len(reloads) == 2
    assert all(took >= 1.5 for _, took in reloads)
    assert reloads[1][0] == pytest.approx(sum(reloads[0]), abs=0.11)  # once the first landed
    assert found["seconds"] >= 3.0 and found["errors"] == 0 and found["requests"] > 0
    assert samples[-1][0] >= 3.0


def test_a_reload_that_never_lands_ends_the_load_after_the_settling_time(tmp_path, monkeypatch):
    monkeypatch.setattr(soak, "SETTLE_SECONDS", 1.0)
    found, _, reloads = _soak(tmp_path, seconds=1.0, reloads=1, load_seconds=1e9)
    assert reloads == [] and 2.0 <= found["seconds"] < 30
