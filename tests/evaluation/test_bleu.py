"""BLEU tokenises as sacreBLEU does for the target language, says so in its signature, and a
missing tokenizer or an unknown one is a one-line error before any work."""

import pytest

from conftest import run_cli
from tfnmt.errors import ConfigError
from tfnmt.evaluation import bleu, length_buckets

# Unsegmented Japanese: to 13a each sentence is one word.
JA_HYPOTHESES = ["猫が座っている", "私は学校に行きます"]
JA_REFERENCES = ["猫が座っています", "私は学校へ行きます"]


def test_a_japanese_target_is_scored_with_mecab_not_13a():
    japanese = bleu.score(JA_HYPOTHESES, JA_REFERENCES, target_lang="ja")
    assert "tok:ja-mecab" in japanese["bleu_signature"]
    assert japanese["bleu"] > 30
    # What scoring them as any other language gives: no 1-gram matches at all.
    assert bleu.score(JA_HYPOTHESES, JA_REFERENCES, target_lang="de")["bleu"] == 0.0


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


def test_evaluate_prints_the_tokenizer_it_used_and_refuses_an_unknown_one(trained_model, capsys):
    assert run_cli("evaluate", f"--model_dir={trained_model}", "--test_limit=5",
                   "--bleu_tokenize=char") == 0
    assert "tok:char" in capsys.readouterr().out
    assert run_cli("evaluate", f"--model_dir={trained_model}", "--test_limit=5",
                   "--bleu_tokenize=mecab") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("tfnmt evaluate: error: --bleu_tokenize='mecab'")
