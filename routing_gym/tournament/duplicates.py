"""Copies of one question: the normalised text that decides what "the same question" means.

A router sees a question's text, so two queries whose texts differ only in letter case or
whitespace are the same question to it. ``normalise_question`` lowercases a text and collapses
every run of whitespace (spaces, tabs, newlines) to one space, stripping both ends; nothing else
(punctuation, digits and answer options stay). Splits put every copy of a normalised text on
one side (``Tournament.with_splits``), and ``duplicate_counts`` reports the copies within and
across splits (``routing-gym data info``, the header of ``compare``).
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pandas as pd


def normalise_question(text: str) -> str:
    """Lowercase, whitespace runs collapsed to one space, ends stripped."""
    return " ".join(str(text).lower().split())


def question_groups(texts: Iterable[str]) -> np.ndarray:
    """``int64 [n]``: one group id per text, numbered by first occurrence (copies share one)."""
    normalised = pd.Series([normalise_question(t) for t in texts], dtype=object)
    codes, _ = pd.factorize(normalised, sort=False)
    return codes.astype(np.int64)


def duplicate_counts(prompts: Iterable[str], splits: Iterable[str]) -> dict[str, Any]:
    """Copies of a normalised question text, within and across splits.

    ``within``: per split, the queries whose normalised text an earlier query of the same split
    has (extra copies). ``cross_split_texts``: normalised texts present in more than one split;
    ``cross_split_queries``: the queries holding such a text (all copies, every split)."""
    frame = pd.DataFrame({"group": question_groups(prompts), "split": list(splits)})
    within = {str(s): int(g.duplicated().sum()) for s, g in frame.groupby("split", sort=True)["group"]}
    sides = frame.groupby("group")["split"].nunique()
    crossing = sides.index[sides > 1]
    return {
        "normalisation": "lowercase, whitespace runs collapsed",
        "within": within,
        "cross_split_texts": int(len(crossing)),
        "cross_split_queries": int(frame["group"].isin(crossing).sum()),
    }
