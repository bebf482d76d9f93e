import pytest

from conftest import run_cli
from tfnmt.errors import ConfigError
from tfnmt.evaluation import bleu
from tfnmt.evaluation.length_buckets import bucket_scores, parse_edges

SOURCES = ["one two", "a b c d e", "w " * 12, "x " * 25, "only"]
REFERENCES = ["der Hund läuft schnell", "die Katze schläft im Haus", "ein Mann fährt Rad",
              "zwei Frauen sitzen auf der Bank", "rot"]
HYPOTHESES = ["der Hund läuft", "die Katze schläft im Haus", "ein Mann fährt ein Rad",
              "Frauen sitzen", "rot"]


def test_each_sentence_lands_in_its_bucket_and_is_scored_alone():
    buckets, longer = bucket_scores(SOURCES, HYPOTHESES, REFERENCES, [5, 20])
    assert [(b["bucket"], b["sentences"]) for b in buckets] == [("1-5", 3), ("6-20", 1), (">20", 1)]
    expected = bleu.score([HYPOTHESES[i] for i in (0, 1, 4)], [REFERENCES[i] for i in (0, 1, 4)])
    assert buckets[0]["bleu"] == pytest.approx(expected["bleu"])
    assert buckets[1]["bleu"] == pytest.approx(bleu.score([HYPOTHESES[2]], [REFERENCES[2]])["bleu"])
    # "longer than" rows are cumulative: >5 holds the 12- and the 25-word sentence.
    assert [(r["bucket"], r["sentences"]) for r in longer] == [(">5", 2), (">20", 1)]
    assert longer[0]["bleu"] == pytest.approx(
        bleu.score(HYPOTHESES[2:4], REFERENCES[2:4])["bleu"])


def test_an_empty_bucket_has_no_score():
    buckets, _ = bucket_scores(SOURCES[:2], HYPOTHESES[:2], REFERENCES[:2], [5, 20])
    assert buckets[1] == {"bucket": "6-20", "sentences": 0, "bleu": None}


@pytest.mark.parametrize("text", ["10,x", "20,10", "0,5", ","])
def test_bad_edges_are_config_errors(text):
    with pytest.raises(ConfigError, match="--length_buckets"):
        parse_edges(text)


@pytest.mark.slow
def test_evaluate_prints_bleu_by_source_length(trained_model, capsys):
    assert run_cli("evaluate", f"--model_dir={trained_model}", "--test_limit=20",
                   "--beam_size=2", "--length_buckets=3,5") == 0
    out = capsys.readouterr().out
    assert "BLEU by source length:" in out and "BLEU on sources longer than:" in out
    rows = [line.split() for line in out.splitlines() if "sentences  BLEU" in line]
    assert [r[0] for r in rows] == ["1-3", "4-5", ">5", ">3", ">5"]
    assert sum(int(r[2]) for r in rows[:3]) == 20  # every test sentence in exactly one bucket
    assert run_cli("evaluate", f"--model_dir={trained_model}", "--length_buckets=5,3") == 2
    assert "--length_buckets='5,3'" in capsys.readouterr().err
