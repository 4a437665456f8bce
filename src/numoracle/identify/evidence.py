"""How strongly a recording's outputs say that the kernel is the candidate reproducing them, rather than an order
outside the candidates tried that lands on the same outputs by chance.

An automatic search tries many candidates (an open set: the kernel may be none of them). Where the tried candidates'
predictions take few distinct values on an output, a kernel outside the set lands on one of those values, and so
matches some candidate, by chance. The estimate compares two explanations of the observed outputs y:

* the kernel is one of the N tried candidates (each as likely): y is predicted with probability k / N, k the
  candidates that reproduce every output. Candidates that are one arithmetic (the verdict's class: no drawn input
  tells them apart) are one hypothesis and count once (every order of a sum of two terms is one arithmetic);
* the kernel is an order outside the set that rounds like the tried candidates do, each output on its own: output i
  lands on y_i with probability q_i, the fraction of tried candidates predicting y_i there. Independent outputs
  (other inputs), so y with probability prod q_i.

log10 of their ratio, ``log10(k / N) - sum log10(q_i)``, is the evidence. One output gives exactly none (k / N is
q_1); each output adds ``-log10(q_i)``, little where most candidates predict the kernel's value and much where few
do. The candidates' predictions are kept on the rows every candidate is scored on (the pruning rows, at most
``problem.WATCHED`` elements); rows are exchangeable (one kind of data), so the per-output evidence measured there is
counted for every output. REPRODUCED against an open set needs ``THRESHOLD`` (1000 to 1); below it the verdict is
AMBIGUOUS with fresh inputs on which the candidate predicts bits: the kernel rerun on them gives the outputs the
recording lacks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Evidence", "evidence", "THRESHOLD"]

THRESHOLD = 3.0      # log10 of the likelihood ratio an open search needs to say REPRODUCED: 1000 to 1


@dataclass(frozen=True)
class Evidence:
    """The likelihood ratio (log10) of "the kernel is the reproducing candidate" against "an order outside the tried
    set lands on these outputs by chance", and what it was estimated from."""

    outputs: int          # the kernel's output elements (every one counted)
    watched: int          # output elements every candidate was scored on (the estimate reads these)
    candidates: int       # candidates tried there (N)
    matching: int         # of which reproduce the kernel's outputs there (k)
    per_output: float     # -mean log10 q_i: the evidence one output carries (0: every candidate predicts it)
    log10_ratio: float    # log10(k / N) + outputs * per_output
    needed: float = THRESHOLD

    @property
    def enough(self) -> bool:
        return self.log10_ratio >= self.needed

    def outputs_needed(self) -> int | None:
        """Outputs with this per-output evidence that reach ``needed`` (None: outputs here carry none)."""
        if self.per_output <= 0:
            return None
        return max(1, math.ceil((self.needed - math.log10(self.matching / self.candidates)) / self.per_output))

    def text(self) -> str:
        return (f"evidence 10^{self.log10_ratio:.1f} to 1 that the kernel is the reproducing candidate rather than an "
                f"order outside the {self.candidates} tried landing on these outputs by chance ({self.matching} of "
                f"{self.candidates} tried reproduce the {self.watched} outputs scored by all; one output carries "
                f"10^{self.per_output:.2f}, {self.outputs} output(s) in all; REPRODUCED needs 10^{self.needed:g})")

    def to_dict(self) -> dict[str, Any]:
        return {"outputs": self.outputs, "watched": self.watched, "candidates": self.candidates,
                "matching": self.matching, "per_output": self.per_output, "log10_ratio": self.log10_ratio,
                "needed": self.needed, "enough": self.enough}


def evidence(predictions: dict, observed: np.ndarray, outputs: int) -> Evidence | None:
    """The evidence from the tried candidates' predictions (key -> output codes on the watched elements) and the
    kernel's codes there; None when no candidate reproduces them."""
    ref = np.asarray(observed, np.uint64).ravel()
    rows = [np.asarray(v, np.uint64) for v in predictions.values() if np.asarray(v).size == ref.size]
    if not rows or not ref.size:
        return None
    hits = np.stack(rows) == ref[None, :]
    k, n = int(hits.all(axis=1).sum()), hits.shape[0]
    if k == 0:
        return None
    q = hits.mean(axis=0)              # > 0 on every element: the k reproducing candidates predict it
    per = float(-np.mean(np.log10(q)))
    return Evidence(int(outputs), int(ref.size), n, k, per, math.log10(k / n) + int(outputs) * per)
