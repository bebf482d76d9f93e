"""Corpus scores with sacreBLEU: BLEU (cased) and chrF.

BLEU tokenises with sacreBLEU's own default for the target language (`zh` for Chinese,
`ja-mecab` for Japanese, `ko-mecab` for Korean, `13a` otherwise), or the tokenizer named by
--bleu_tokenize; 13a on unsegmented Japanese or Chinese text would count whole sentences as words.
The signature, which names the tokenizer, goes with every score.
"""

import sacrebleu

from tfnmt.errors import ConfigError

TOKENIZERS = tuple(sorted(sacrebleu.metrics.BLEU.TOKENIZERS))
# What sacreBLEU needs beyond itself for a tokenizer: the package extra that installs it.
_EXTRAS = {"ja-mecab": "ja", "ko-mecab": "ko"}


def metric(lowercase=False, target_lang="", tokenize=""):
    """sacreBLEU's BLEU for this target language (a code such as de, ja) or tokenizer; a
    ConfigError if the tokenizer is unknown or not installed (call it before long work)."""
    if tokenize and tokenize not in TOKENIZERS:
        raise ConfigError(f"--bleu_tokenize={tokenize!r}: choose one of {', '.join(TOKENIZERS)}")
    try:
        return sacrebleu.metrics.BLEU(lowercase=lowercase, tokenize=tokenize or None,
                                      trg_lang=target_lang or "")
    except (ImportError, RuntimeError):  # sacreBLEU's word for a tokenizer not installed
        name = tokenize or sacrebleu.metrics.BLEU._TOKENIZER_MAP.get(target_lang, "")
        raise ConfigError(f"BLEU on {target_lang or 'this'} text tokenises with {name}, which is "
                          f"not installed: pip install -e \".[{_EXTRAS.get(name, 'ja,ko')}]\", or "
                          "choose another --bleu_tokenize") from None


def score(hypotheses, references, lowercase=False, target_lang="", tokenize=""):
    """Returns {"bleu", "chrf", "bleu_signature", "chrf_signature", "bleu_detail"} for
    detokenised text."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    bleu = metric(lowercase, target_lang, tokenize)
    chrf = sacrebleu.metrics.CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return {"bleu": bleu_score.score, "chrf": chrf_score.score,
            "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature()),
            "bleu_detail": str(bleu_score)}
