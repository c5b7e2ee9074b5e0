"""Built-in datasets the playground can train on without downloading anything, made by code in this package.

Every pair is produced here, so the sets are small, exact and reproducible:

* ``reverse``: random symbol sequences and the same sequence reversed (reverse.py).
* ``numbers``: English number words and their German spelling ("421" -> "four hundred twenty-one" ->
  "vierhunderteinundzwanzig") (numbers.py).
* ``mini-translation``: English sentences from a small hand-written grammar and their German translation, with
  gender/case agreement, verb-second order, verb-final subordinate clauses and separable verbs
  (mini_translation.py, from lexicon.py, verbs.py, declension.py and sentences.py).

catalog.py names them; ``python -m playground.datasets`` (write.py) regenerates ``assets/datasets``, byte-identical
for the same seed. This package imports nothing from the rest of the playground.
"""
