"""Translation metrics: sacreBLEU's BLEU and chrF (with their signatures) and exact match."""

from __future__ import annotations

from dataclasses import dataclass

import sacrebleu


@dataclass
class Scores:
    bleu: float
    chrf: float
    exact_match: float  # fraction of hypotheses identical to their reference
    bleu_signature: str
    chrf_signature: str
    n: int

    def as_dict(self) -> dict:
        return {"bleu": self.bleu, "chrf": self.chrf, "exact_match": self.exact_match, "n": self.n,
                "bleu_signature": self.bleu_signature, "chrf_signature": self.chrf_signature}


def score(hypotheses: list[str], references: list[str]) -> Scores:
    """Corpus BLEU (cased, 13a tokenisation: sacreBLEU's defaults) and chrF, plus exact match."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    bleu, chrf = sacrebleu.BLEU(), sacrebleu.CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    exact = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references)) / max(len(references), 1)
    return Scores(b.score, c.score, exact, str(bleu.get_signature()), str(chrf.get_signature()), len(references))
