"""Corpus scores with sacreBLEU: BLEU (cased, 13a tokenisation by default) and chrF."""

import sacrebleu


def score(hypotheses, references, lowercase=False, tokenize="13a"):
    """Returns {"bleu", "chrf", "bleu_signature", "chrf_signature"} for detokenised text."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    bleu = sacrebleu.metrics.BLEU(lowercase=lowercase, tokenize=tokenize)
    chrf = sacrebleu.metrics.CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return {"bleu": bleu_score.score, "chrf": chrf_score.score,
            "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature()),
            "bleu_detail": str(bleu_score)}
