import copy
import json
import os

import pytest

from tfnmt.experiments import plots

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def report():
    # A committed report: two systems, two seeds, validation curves and length buckets.
    with open(os.path.join(REPO, "docs", "results", "deeplau-2x2", "report.json")) as f:
        return json.load(f)


def _contents(root):
    out = {}
    for name in sorted(os.listdir(root)):
        with open(os.path.join(root, name), "rb") as f:
            out[name] = f.read()
    return out


def test_a_plot_is_redrawn_only_when_what_it_shows_changed(report, tmp_path, monkeypatch):
    drawn = plots.write(str(tmp_path), report)
    assert drawn == report["plots"]  # the lines the committed report counted
    first = _contents(tmp_path)
    assert set(first) == set(drawn) and all(b.startswith(b"\x89PNG") for b in first.values())

    # The same data again: no figure is drawn, the files and the line counts are kept.
    def no_drawing():
        raise AssertionError("drew a figure whose data had not changed")
    real_pyplot = plots._pyplot
    monkeypatch.setattr(plots, "_pyplot", no_drawing)
    assert plots.write(str(tmp_path), copy.deepcopy(report)) == drawn
    assert _contents(tmp_path) == first

    # One validation point changed: the validation figures are redrawn, the length one is not.
    calls = []
    monkeypatch.setattr(plots, "_pyplot", lambda: calls.append(1) or real_pyplot())
    changed = copy.deepcopy(report)
    changed["runs"][0]["validation"][-1]["bleu"] += 1.0
    assert plots.write(str(tmp_path), changed) == drawn and calls == [1]
    now = _contents(tmp_path)
    assert now["validation_bleu.png"] != first["validation_bleu.png"]
    assert now["length_bleu_test.png"] == first["length_bleu_test.png"]

    # A damaged file is drawn again, to the same bytes as a fresh drawing of the same data.
    with open(tmp_path / "length_bleu_test.png", "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n truncated")
    plots.write(str(tmp_path), changed)
    assert _contents(tmp_path)["length_bleu_test.png"] == first["length_bleu_test.png"]
