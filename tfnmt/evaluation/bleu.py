"""Corpus scores with sacreBLEU: BLEU (cased) and chrF.

BLEU tokenises with sacreBLEU's own default for the target language (`zh` for Chinese,
`ja-mecab` for Japanese, `ko-mecab` for Korean, `13a` otherwise), or the tokenizer named by
--bleu_tokenize; 13a on unsegmented Japanese or Chinese text would count whole sentences as words.
The signature, which names the tokenizer, goes with every score.

Beside it, the literature's Multi30k figure (`bleu_moses_lc`): multi-bleu.perl -lc on
Moses-tokenised text, as Multi30k papers report it. Hypotheses and references are tokenised by
the Moses tokenizer for the target language (sacremoses; no escaping) and lowercased, then scored
as whitespace tokens with no smoothing. It reads higher than sacreBLEU's cased, detokenised score
and is not comparable with it, only with papers that report it.
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
    """Returns {"bleu", "chrf", "bleu_moses_lc", "bleu_signature", "chrf_signature",
    "bleu_detail"} for detokenised text."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    bleu = metric(lowercase, target_lang, tokenize)
    chrf = sacrebleu.metrics.CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return {"bleu": bleu_score.score, "chrf": chrf_score.score,
            "bleu_moses_lc": moses_lowercased_bleu(hypotheses, references, target_lang),
            "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature()),
            "bleu_detail": str(bleu_score)}


MOSES_LC_SIGNATURE = "multi-bleu.perl -lc style: sacremoses tokenizer (no escaping), lowercased"


def moses_lowercased_bleu(hypotheses, references, target_lang="en"):
    """BLEU as multi-bleu.perl -lc computes it on Moses-tokenised text (the module's note)."""
    from sacremoses import MosesTokenizer
    tokenizer = MosesTokenizer(lang=target_lang or "en")

    def prepare(lines):
        return [tokenizer.tokenize(line, escape=False, return_str=True).lower() for line in lines]
    metric = sacrebleu.metrics.BLEU(tokenize="none", smooth_method="none", force=True)
    return metric.corpus_score(prepare(hypotheses), [prepare(references)]).score
