"""BLEU tokenises as sacreBLEU does for the target language, says so in its signature, and a
missing tokenizer or an unknown one is a one-line error before any work."""

import pytest

from conftest import run_cli
from tfnmt.errors import ConfigError
from tfnmt.evaluation import bleu, length_buckets

# Unsegmented Japanese: to 13a each sentence is one word.
JA_HYPOTHESES = ["猫が座っている", "私は学校に行きます"]
JA_REFERENCES = ["猫が座っています", "私は学校へ行きます"]


@pytest.mark.slow
def test_a_japanese_target_is_scored_with_mecab_not_13a():
    japanese = bleu.score(JA_HYPOTHESES, JA_REFERENCES, target_lang="ja")
    assert "tok:ja-mecab" in japanese["bleu_signature"]
    assert japanese["bleu"] > 30
    # What scoring them as any other language gives: no 1-gram matches at all.
    assert bleu.score(JA_HYPOTHESES, JA_REFERENCES, target_lang="de")["bleu"] == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("target_lang,tokenizer", [("zh", "tok:zh"), ("ko", "tok:ko-mecab"),
                                                   ("de", "tok:13a"), ("", "tok:13a")])
def test_each_target_language_gets_sacrebleus_default_tokenizer(target_lang, tokenizer):
    assert tokenizer in bleu.score(["a b"], ["a b"], target_lang=target_lang)["bleu_signature"]


def test_bleu_tokenize_overrides_the_language_default_everywhere():
    scored = bleu.score(JA_HYPOTHESES, JA_REFERENCES, target_lang="ja", tokenize="char")
    assert "tok:char" in scored["bleu_signature"]
    buckets, _ = length_buckets.bucket_scores(["a", "a b"], JA_HYPOTHESES, JA_REFERENCES, [1],
                                              target_lang="ja", tokenize="char")
    assert buckets[0]["bleu"] == pytest.approx(bleu.score(JA_HYPOTHESES[:1], JA_REFERENCES[:1],
                                                          tokenize="char")["bleu"])


def test_unknown_or_missing_tokenizer_is_a_config_error(monkeypatch):
    with pytest.raises(ConfigError, match="--bleu_tokenize='mecab': choose one of"):
        bleu.metric(tokenize="mecab")
    from sacrebleu.tokenizers import tokenizer_ja_mecab
    monkeypatch.setattr(tokenizer_ja_mecab, "MeCab", None)  # what sacreBLEU sets without MeCab
    with pytest.raises(ConfigError, match=r'ja-mecab, which is not installed: pip install -e "\.\[ja\]"'):
        bleu.metric(target_lang="ja")


@pytest.mark.slow
def test_evaluate_prints_the_tokenizer_it_used_and_refuses_an_unknown_one(trained_model, capsys):
    assert run_cli("evaluate", f"--model_dir={trained_model}", "--test_limit=5",
                   "--bleu_tokenize=char") == 0
    out = capsys.readouterr().out
    assert "tok:char" in out and "as Multi30k papers report it (multi-bleu.perl -lc style" in out
    assert run_cli("evaluate", f"--model_dir={trained_model}", "--test_limit=5",
                   "--bleu_tokenize=mecab") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("tfnmt evaluate: error: --bleu_tokenize='mecab'")


def test_the_literatures_bleu_tokenises_like_moses_and_lowercases():
    import math
    # Moses splits the final period and the comma, keeps umlauts and ß, and case is ignored:
    # the same sentence, cased and detokenised otherwise, scores 100.
    assert bleu.moses_lowercased_bleu(["Zwei Männer, die Fußball spielen."],
                                      ["zwei männer , die fußball spielen ."], "de") == pytest.approx(100)
    # By hand: "zwei männer spielen fußball im park ." (7 tokens) against
    # "zwei männer spielen fußball auf dem rasen ." (8): n-gram matches 5/7, 3/6, 2/5, 1/4,
    # brevity penalty exp(1 - 8/7).
    hand = 100 * math.exp(1 - 8 / 7) * (5 / 7 * 3 / 6 * 2 / 5 * 1 / 4) ** 0.25
    score = bleu.moses_lowercased_bleu(["zwei Männer spielen Fußball im Park."],
                                       ["Zwei Männer spielen Fußball auf dem Rasen."], "de")
    assert score == pytest.approx(hand, abs=1e-9) and round(score, 2) == 37.68
    # sacreBLEU's cased score of the same pair differs: "zwei" is not "Zwei" there.
    assert bleu.score(["zwei Männer spielen Fußball im Park."],
                      ["Zwei Männer spielen Fußball auf dem Rasen."], target_lang="de")["bleu"] < score
    # No smoothing, as multi-bleu.perl: no 4-gram in common is 0.
    assert bleu.moses_lowercased_bleu(["ein Hund läuft."], ["Ein Hund rennt."], "de") == 0.0
