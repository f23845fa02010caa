"""The Tournament: every candidate model's logged outcome on every question.

In memory a tournament is three parts:

- ``queries``: a DataFrame with one row per question (see ``schema.QUERY_COLUMNS``),
- ``models``: a DataFrame with one row per candidate model (``schema.MODEL_COLUMNS``),
- dense ``[N, K]`` float arrays ``correct``, ``energy_j``, ``latency_s``, ``mean_power_w``,
  ``input_tokens``, ``output_tokens`` (row i = ``queries`` row i, column k = ``models`` row k),
  plus an optional object array ``output_text``.

Rewards, oracles and evaluation are vectorized lookups into these arrays. On disk see
``routing_gym.tournament.io``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

import numpy as np
import pandas as pd

from routing_gym.errors import EmptySplitError, TournamentValidationError, UnknownNameError
from routing_gym.tournament.card import DataCard
from routing_gym.tournament.duplicates import question_groups
from routing_gym.tournament.io import read_tables, write_tables
from routing_gym.tournament.schema import (
    ENERGY_PROVENANCES,
    METRIC_ARRAYS,
    MODEL_COLUMNS,
    OUTCOME_COLUMNS,
    QUERY_COLUMNS,
    Column,
)

IN_TOURNAMENT = "in this tournament"  # how UnknownNameError lists a tournament's own benchmarks, models and splits
# The reference paper's split: 2,050 training and 913 held-out questions.
PAPER_SPLIT = {"train": 2050, "test": 913}

Problem = tuple[str, "int | None", "str | None", str]
ROW_PROBLEM_LIMIT = 20  # rows listed per kind of problem before a total
MISSING_PAIR_EXAMPLES = 5


class Outcomes(NamedTuple):
    """``[n, K]`` outcome arrays of a block of queries; the input of every reward function."""

    correct: np.ndarray
    energy_j: np.ndarray
    latency_s: np.ndarray
    mean_power_w: np.ndarray


@dataclass
class Tournament:
    """Logged outcomes of K models on N questions. Build with ``from_records`` or directly
    from arrays; both validate and raise ``TournamentValidationError`` naming every problem.
    """

    queries: pd.DataFrame
    models: pd.DataFrame
    correct: np.ndarray
    energy_j: np.ndarray
    latency_s: np.ndarray
    mean_power_w: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    card: DataCard
    output_text: np.ndarray | None = None
    source: str = field(default="<memory>", compare=False)

    def __post_init__(self) -> None:
        self.queries, query_problems = _normalise_table(self.queries, QUERY_COLUMNS, f"{self.source} (queries)")
        self.models, model_problems = _normalise_table(self.models, MODEL_COLUMNS, f"{self.source} (models)")
        if query_problems or model_problems:
            raise TournamentValidationError(query_problems + model_problems)
        for name in METRIC_ARRAYS:
            setattr(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        problems = _validate(self)
        if problems:
            raise TournamentValidationError(problems)
        self._benchmark_codes: np.ndarray | None = None
        # Frozen: one tournament is shared by every env, agent and cache that resolves it, so an
        # in-place edit would silently change all of them. Methods return new tournaments.
        for name in (*METRIC_ARRAYS, "output_text"):
            array = getattr(self, name, None)
            if isinstance(array, np.ndarray):
                if array.flags.writeable:
                    array = array.copy() if array.base is not None else array
                array.setflags(write=False)
                setattr(self, name, array)

    # ------------------------------------------------------------------ shape and lookup
    @property
    def n_queries(self) -> int:
        return len(self.queries)

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def model_ids(self) -> list[str]:
        return self.models["model_id"].tolist()

    @property
    def query_ids(self) -> list[str]:
        return self.queries["query_id"].tolist()

    @property
    def benchmarks(self) -> list[str]:
        """Sorted benchmark names; ``benchmark_codes`` index into this list."""
        return sorted(self.queries["benchmark"].unique().tolist())

    @property
    def prompts(self) -> np.ndarray:
        """The question texts as one read-only object array, built once: every env, batch and
        featurizer over this tournament shares these strings instead of making its own."""
        if getattr(self, "_prompts", None) is None:
            prompts = self.queries["prompt"].to_numpy(dtype=object)
            prompts.setflags(write=False)
            self._prompts = prompts
        return self._prompts

    @property
    def benchmark_codes(self) -> np.ndarray:
        if self._benchmark_codes is None:
            codes = pd.Index(self.benchmarks).get_indexer(self.queries["benchmark"]).astype(np.int64)
            codes.setflags(write=False)
            self._benchmark_codes = codes
        return self._benchmark_codes

    @property
    def fingerprint(self) -> str:
        """A hash of the content (ids, prompts, benchmarks, every outcome array): the key of
        caches that must never confuse two tournaments sharing a name (or a Python id)."""
        if getattr(self, "_fingerprint", None) is None:
            import hashlib

            h = hashlib.sha1(self.card.name.encode())
            for column in ("query_id", "benchmark", "prompt"):
                h.update("\x1e".join(self.queries[column].astype(str)).encode())
            h.update("\x1e".join(self.model_ids).encode())
            for name in METRIC_ARRAYS:
                h.update(np.ascontiguousarray(getattr(self, name)).tobytes())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    @property
    def split_fingerprint(self) -> str:
        """A hash of the per-row split assignment, which ``fingerprint`` leaves out: two folds
        (or two split seeds) of one tournament share a fingerprint and differ here."""
        import hashlib

        return hashlib.sha1("\x1e".join(self.queries["split"].astype(str)).encode()).hexdigest()

    @property
    def has_difficulty(self) -> bool:
        return bool(self.queries["difficulty"].notna().all()) and self.n_queries > 0

    def model_index(self, model_id: str) -> int:
        ids = self.model_ids
        if model_id not in ids:
            raise UnknownNameError("model", model_id, ids, known_as=IN_TOURNAMENT)
        return ids.index(model_id)

    def outcomes(self, rows: np.ndarray | None = None) -> Outcomes:
        """Outcome arrays for ``rows`` (all queries when None)."""
        pick = (lambda a: a) if rows is None else (lambda a: a[rows])
        return Outcomes(pick(self.correct), pick(self.energy_j), pick(self.latency_s), pick(self.mean_power_w))

    # ------------------------------------------------------------------ splits and subsets
    @property
    def splits(self) -> list[str]:
        return sorted(s for s in self.queries["split"].unique().tolist() if s)

    def split_rows(self, split: str | None) -> np.ndarray:
        """Row indices of a split; ``None`` or ``"all"`` selects every query."""
        if split in (None, "all"):
            rows = np.arange(self.n_queries)
        else:
            if not self.splits:
                raise EmptySplitError(
                    f"{self.card.name}: split {split!r} requested but the tournament has no splits; call with_splits()"
                )
            declared = set(self.splits) | set(self.card.split.get("proportions", {}))
            if split not in declared:
                raise UnknownNameError("split", split, sorted(declared) + ["all"], known_as=IN_TOURNAMENT)
            rows = np.flatnonzero(self.queries["split"].to_numpy() == split)
        if len(rows) == 0:
            raise EmptySplitError(f"{self.card.name}: split {split!r} has no queries")
        return rows

    def with_splits(self, seed: int = 0, proportions: dict[str, float] | None = None,
                    benchmark_proportions: dict[str, dict[str, float]] | None = None,
                    hold_out_benchmarks: Iterable[str] = ()) -> Tournament:
        """A copy whose ``split`` column is a seeded group split stratified by benchmark.

        Every copy of a question (the same text after ``normalise_question``: lowercase,
        whitespace collapsed) lands on one side. Groups belong to the benchmark of their first
        copy; every benchmark's groups (benchmarks in sorted order, groups by first occurrence)
        are shuffled with ``numpy.random.default_rng(seed)`` and dealt in that order to the
        splits in ``proportions`` (default 2,050 : 913 as in the paper), each split's share of
        the benchmark's queries set by largest-remainder rounding; a group goes whole to the
        split whose share its first query falls in. Without duplicates every group is one
        query and this is the per-query split of earlier versions, draw for draw.
        ``benchmark_proportions``: other proportions for some benchmarks (same split names),
        e.g. to keep a source's own number of test questions per benchmark.
        ``hold_out_benchmarks``: then ``with_held_out_benchmarks`` on the result (every question
        of those benchmarks in ``"test"``; the other benchmarks keep this split draw for draw).
        """
        proportions = dict(proportions or PAPER_SPLIT)
        names = np.array(list(proportions), dtype=object)
        weights = _split_weights(proportions, list(proportions))
        by_benchmark = {b: _split_weights(p, list(proportions)) for b, p in (benchmark_proportions or {}).items()}
        groups = question_groups(self.queries["prompt"])
        first_row = np.unique(groups, return_index=True)[1]  # group g's first query is row first_row[g]
        group_benchmark = self.queries["benchmark"].to_numpy()[first_row]
        sizes = np.bincount(groups)
        rng = np.random.default_rng(seed)
        group_split = np.empty(len(first_row), dtype=object)
        for benchmark in self.benchmarks:
            members = np.flatnonzero(group_benchmark == benchmark)  # in order of first occurrence
            members = members[rng.permutation(len(members))]
            bounds = np.cumsum(_largest_remainder(by_benchmark.get(benchmark, weights) * sizes[members].sum()))
            starts = np.concatenate([[0], np.cumsum(sizes[members])[:-1]])
            group_split[members] = names[np.searchsorted(bounds, starts, side="right")]
        queries = self.queries.copy()
        queries["split"] = group_split[groups].astype(str)
        card = replace(self.card, split={"seed": seed, "proportions": proportions, "stratified_by": "benchmark",
                                         "grouped_by": "normalised question text (lowercase, whitespace collapsed)",
                                         **({"benchmark_proportions": benchmark_proportions} if benchmark_proportions else {})})
        split = replace(self, queries=queries, card=card)
        hold_out_benchmarks = list(hold_out_benchmarks)
        return split.with_held_out_benchmarks(hold_out_benchmarks) if hold_out_benchmarks else split

    def with_held_out_benchmarks(self, benchmarks: Iterable[str], split: str = "test") -> Tournament:
        """A copy whose ``benchmarks`` are unseen in training: every one of their questions moves
        to ``split``, and so does every copy of such a question (same normalised text) in another
        benchmark, so that no text of a held-out benchmark is trained on. Every other query keeps
        its split. The card records ``held_out_benchmarks``, ``held_out_split`` and
        ``held_out_copies`` (queries of other benchmarks moved with them); a second call adds to
        the benchmarks the first held out.
        """
        benchmarks = sorted(set(benchmarks) | set(self.card.split.get("held_out_benchmarks", ())))
        if not self.splits:
            raise EmptySplitError(f"{self.card.name}: holding out benchmarks needs a split; call with_splits() first")
        for benchmark in benchmarks:
            if benchmark not in self.benchmarks:
                raise UnknownNameError("benchmark", benchmark, self.benchmarks, known_as=IN_TOURNAMENT)
        declared = set(self.splits) | set(self.card.split.get("proportions", {}))
        if split not in declared:
            raise UnknownNameError("split", split, sorted(declared), known_as=IN_TOURNAMENT)
        groups = question_groups(self.queries["prompt"])
        in_held_out = self.queries["benchmark"].isin(benchmarks).to_numpy()
        moved = np.isin(groups, groups[in_held_out])  # a held-out question's copies go with it
        if moved.all():
            raise EmptySplitError(f"{self.card.name}: holding out {', '.join(benchmarks)} leaves no question "
                                  "outside the held-out split")
        queries = self.queries.copy()
        queries.loc[moved, "split"] = split
        card = replace(self.card, split={**self.card.split, "held_out_benchmarks": benchmarks, "held_out_split": split,
                                         "held_out_copies": int((moved & ~in_held_out).sum())})
        return replace(self, queries=queries, card=card)

    def subset(
        self,
        rows: Sequence[int] | np.ndarray | None = None,
        benchmarks: Iterable[str] | None = None,
        models: Iterable[str] | None = None,
        split: str | None = None,
    ) -> Tournament:
        """A new tournament restricted to some queries (rows, benchmarks, split) and models."""
        keep = np.ones(self.n_queries, dtype=bool)
        if rows is not None:
            mask = np.zeros(self.n_queries, dtype=bool)
            mask[np.asarray(rows, dtype=np.int64)] = True
            keep &= mask
        if benchmarks is not None:
            benchmarks = list(benchmarks)
            unknown = set(benchmarks) - set(self.benchmarks)
            if unknown:
                raise UnknownNameError("benchmark", sorted(unknown)[0], self.benchmarks, known_as=IN_TOURNAMENT)
            keep &= self.queries["benchmark"].isin(benchmarks).to_numpy()
        if split is not None:
            mask = np.zeros(self.n_queries, dtype=bool)
            mask[self.split_rows(split)] = True
            keep &= mask
        row_idx = np.flatnonzero(keep)
        if len(row_idx) == 0:
            raise EmptySplitError(f"{self.card.name}: the subset selects no queries")
        col_idx = np.arange(self.n_models) if models is None else np.array([self.model_index(m) for m in models])
        if len(col_idx) == 0:
            raise EmptySplitError(f"{self.card.name}: the subset selects no models")
        arrays = {name: getattr(self, name)[np.ix_(row_idx, col_idx)] for name in METRIC_ARRAYS}
        text = None if self.output_text is None else self.output_text[np.ix_(row_idx, col_idx)]
        return replace(
            self,
            queries=self.queries.iloc[row_idx].reset_index(drop=True),
            models=self.models.iloc[col_idx].reset_index(drop=True),
            output_text=text,
            **arrays,
        )

    # ------------------------------------------------------------------ tables
    def to_long(self) -> pd.DataFrame:
        """The outcomes table in long form: one row per (query, model)."""
        n, k = self.n_queries, self.n_models
        data: dict[str, Any] = {
            "query_id": np.repeat(self.queries["query_id"].to_numpy(), k),
            "model_id": np.tile(self.models["model_id"].to_numpy(), n),
        }
        for name in METRIC_ARRAYS:
            data[name] = getattr(self, name).reshape(-1)
        if self.output_text is not None:
            data["output_text"] = self.output_text.reshape(-1)
        return pd.DataFrame(data)

    def model_summary(self, rows: np.ndarray | None = None) -> pd.DataFrame:
        """Per-model accuracy and mean cost over ``rows`` (all queries when None)."""
        sel = slice(None) if rows is None else rows
        return pd.DataFrame(
            {
                "model_id": self.model_ids,
                "params_b": self.models["params_b"].to_numpy(),
                "accuracy": self.correct[sel].mean(axis=0),
                "mean_energy_j": self.energy_j[sel].mean(axis=0),
                "mean_latency_s": self.latency_s[sel].mean(axis=0),
                "mean_power_w": self.mean_power_w[sel].mean(axis=0),
                "mean_output_tokens": np.nanmean(self.output_tokens[sel], axis=0)
                if np.isfinite(self.output_tokens[sel]).any()
                else np.full(self.n_models, np.nan),
                "energy_provenance": self.models["energy_provenance"].to_numpy(),
            }
        )

    @classmethod
    def from_records(
        cls,
        queries: pd.DataFrame | Sequence[dict[str, Any]],
        models: pd.DataFrame | Sequence[dict[str, Any]],
        outcomes: pd.DataFrame | Sequence[dict[str, Any]],
        card: DataCard | dict[str, Any],
        source: str = "<memory>",
        files: dict[str, str] | None = None,
    ) -> Tournament:
        """Build from the three tables in long form, validating every row.

        ``files`` names where each table came from (keys ``queries``, ``models``,
        ``outcomes``) so that errors point at the right file; rows are numbered from 1.
        """
        files = files or {t: f"{source} ({t})" for t in ("queries", "models", "outcomes")}
        card = card if isinstance(card, DataCard) else DataCard.from_dict(card, source=f"{source} (card)")
        queries, problems = _normalise_table(pd.DataFrame(queries), QUERY_COLUMNS, files["queries"])
        models, model_problems = _normalise_table(pd.DataFrame(models), MODEL_COLUMNS, files["models"])
        outcomes, outcome_problems = _normalise_table(pd.DataFrame(outcomes), OUTCOME_COLUMNS, files["outcomes"])
        problems += model_problems + outcome_problems
        problems += _empty_tables(queries, models, files["queries"], files["models"])
        problems += _unique_ids(queries, "query_id", files["queries"]) + _unique_ids(models, "model_id", files["models"])
        if problems:
            raise TournamentValidationError(problems)

        n, k = len(queries), len(models)
        qi = pd.Index(queries["query_id"]).get_indexer(outcomes["query_id"])
        mi = pd.Index(models["model_id"]).get_indexer(outcomes["model_id"])
        for codes, column, table in ((qi, "query_id", "queries"), (mi, "model_id", "models")):
            for row in np.flatnonzero(codes < 0)[:50]:
                problems.append(
                    (files["outcomes"], int(row) + 1, column, f"unknown {column} {outcomes[column].iloc[row]!r} (not in {table})")
                )
        valid = (qi >= 0) & (mi >= 0)
        flat = qi[valid].astype(np.int64) * k + mi[valid]
        counts = np.bincount(flat, minlength=n * k)
        for cell in np.flatnonzero(counts > 1)[:50]:
            rows = np.flatnonzero(valid)[flat == cell] + 1
            problems.append(
                (files["outcomes"], int(rows[1]), None,
                 f"duplicate pair (query {queries['query_id'].iloc[cell // k]!r}, model {models['model_id'].iloc[cell % k]!r}), "
                 f"also at row(s) {rows.tolist()}")
            )
        missing = np.flatnonzero(counts == 0)
        if len(missing):
            # One problem for all missing pairs: one line each would push every other problem
            # out of the report, and the count in the header would count lines, not pairs.
            examples = ", ".join(
                f"({queries['query_id'].iloc[cell // k]!r}, {models['model_id'].iloc[cell % k]!r})"
                for cell in missing[:MISSING_PAIR_EXAMPLES]
            )
            more = f" and {len(missing) - MISSING_PAIR_EXAMPLES:,} more" if len(missing) > MISSING_PAIR_EXAMPLES else ""
            problems.append(
                (files["outcomes"], None, None,
                 f"{len(missing):,} of {n * k:,} (query, model) pairs are missing: {examples}{more}")
            )
        problems += _check_values(outcomes, files["outcomes"], row_of=lambda i: int(i) + 1)
        problems += _check_tables(queries, models, files["queries"], files["models"])
        if problems:
            raise TournamentValidationError(problems)

        order = np.argsort(flat, kind="stable")
        arrays = {name: outcomes[name].to_numpy(dtype=np.float64)[valid][order].reshape(n, k) for name in METRIC_ARRAYS}
        text = None
        if "output_text" in outcomes and outcomes["output_text"].notna().any():
            text = outcomes["output_text"].to_numpy(dtype=object)[valid][order].reshape(n, k)
        return cls(queries=queries, models=models, card=card, output_text=text, source=source, **arrays)

    def save(self, path: str | os.PathLike, format: str = "parquet") -> None:
        save_tournament(self, path, format=format)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Tournament:
        return load_tournament(path)


def save_tournament(t: Tournament, path: str | os.PathLike, format: str = "parquet") -> Path:
    """Write ``t`` as a tournament directory (``routing_gym.tournament.io`` describes it)."""
    return write_tables(path, {"queries": t.queries, "models": t.models, "outcomes": t.to_long()}, t.card, format)


def load_tournament(path: str | os.PathLike) -> Tournament:
    """Read and validate a tournament directory."""
    frames, files, card = read_tables(path)
    return Tournament.from_records(
        frames["queries"], frames["models"], frames["outcomes"], card, source=str(Path(path)), files=files
    )


def leave_one_benchmark_out(tournament: Tournament, benchmarks: Iterable[str] | None = None,
                            split: str = "test") -> Iterator[tuple[str, Tournament]]:
    """The leave-one-benchmark-out protocol: for each benchmark (``benchmarks``, default every
    one, in sorted order) the pair (benchmark, ``tournament.with_held_out_benchmarks([it], split)``).

    ``tournament`` must already have its split: the other benchmarks keep it (a real source's
    own split included), so the held-out benchmark is the only change between folds. For
    folds whose other benchmarks are all training, split with ``proportions={"train": 1,
    "test": 0}`` first. Folds are made lazily, one tournament at a time.
    """
    names = tournament.benchmarks if benchmarks is None else list(benchmarks)
    if len(tournament.benchmarks) < 2:
        raise EmptySplitError(f"{tournament.card.name}: leave-one-benchmark-out needs at least two benchmarks, "
                              f"it has {tournament.benchmarks}")
    for benchmark in names:  # checked before the first fold is made
        if benchmark not in tournament.benchmarks:
            raise UnknownNameError("benchmark", benchmark, tournament.benchmarks, known_as=IN_TOURNAMENT)
    return ((benchmark, tournament.with_held_out_benchmarks([benchmark], split)) for benchmark in names)


# ---------------------------------------------------------------------- helpers
def _split_weights(proportions: dict[str, float], names: list[str]) -> np.ndarray:
    """Proportions as weights summing to 1, in the order of ``names`` (checked to be the same names)."""
    if not proportions or any(v < 0 for v in proportions.values()) or sum(proportions.values()) <= 0:
        raise ValueError(f"split proportions must be non-negative and sum above zero, got {proportions}")
    if set(proportions) != set(names):
        raise ValueError(f"split proportions name {sorted(proportions)}, expected the splits {names}")
    weights = np.array([proportions[n] for n in names], dtype=float)
    return weights / weights.sum()


def _largest_remainder(quotas: np.ndarray) -> np.ndarray:
    counts = np.floor(quotas).astype(int)
    short = int(round(quotas.sum())) - counts.sum()
    counts[np.argsort(-(quotas - counts), kind="stable")[:short]] += 1
    return counts


def _normalise_table(frame: pd.DataFrame, columns: tuple[Column, ...], where: str) -> tuple[pd.DataFrame, list[Problem]]:
    """Check required columns exist and fill optional ones with typed defaults.

    Returns the table and its problems: values of a number column that are not numbers
    (``"yes"`` in ``correct``). Null text becomes ``""``, which the id and benchmark checks
    report as empty.
    """
    frame = frame.reset_index(drop=True).copy()
    missing = [c.name for c in columns if c.required and c.name not in frame.columns]
    if missing:
        raise TournamentValidationError(
            [(where, None, name, "required column is missing") for name in missing]
        )
    problems: list[Problem] = []
    for column in columns:
        if column.name in frame.columns:
            if column.kind == "str" and column.name != "output_text":
                frame[column.name] = frame[column.name].fillna("").astype(str)
            elif column.kind == "float":
                raw = frame[column.name]
                numeric = pd.to_numeric(raw, errors="coerce")
                if raw.dtype == object:  # only text can hold a non-number ("yes", "0.5x")
                    blank = raw.isna() | raw.astype(str).str.strip().str.lower().isin(["", "nan", "none", "null"])
                    problems += _first_rows(where, column.name, (numeric.isna() & ~blank).to_numpy(),
                                            lambda row, raw=raw: f"{raw.iloc[row]!r} is not a number")
                frame[column.name] = numeric.astype(np.float64)
            elif column.kind == "bool":
                frame[column.name] = frame[column.name].fillna(False).astype(bool)
            elif column.kind == "json":
                frame[column.name] = [v if isinstance(v, dict) else {} for v in frame[column.name]]
            continue
        if column.name == "output_text":
            continue
        default = {"str": "", "float": np.nan, "bool": False}.get(column.kind)
        frame[column.name] = [{} for _ in range(len(frame))] if column.kind == "json" else default
    return frame, problems


def _first_rows(where: str, column: str, bad: np.ndarray, message) -> list[Problem]:
    """A problem for each of the first ``ROW_PROBLEM_LIMIT`` bad rows, then one with the total."""
    rows = np.flatnonzero(bad)
    problems: list[Problem] = [(where, int(row) + 1, column, message(int(row))) for row in rows[:ROW_PROBLEM_LIMIT]]
    if len(rows) > ROW_PROBLEM_LIMIT:
        problems.append((where, None, column, f"{len(rows):,} rows in all have this problem"))
    return problems


def _empty_tables(queries: pd.DataFrame, models: pd.DataFrame, queries_file: str, models_file: str) -> list[Problem]:
    empty = [(file, f"has no {what}: a tournament needs at least one question and one model")
             for frame, file, what in ((queries, queries_file, "questions"), (models, models_file, "models"))
             if len(frame) == 0]
    return [(file, None, None, message) for file, message in empty]


def _unique_ids(frame: pd.DataFrame, column: str, where: str) -> list[Problem]:
    problems: list[Problem] = []
    dup = frame[column].duplicated(keep="first").to_numpy()
    for row in np.flatnonzero(dup)[:50]:
        problems.append((where, int(row) + 1, column, f"duplicate {column} {frame[column].iloc[row]!r}"))
    for row in np.flatnonzero(frame[column].to_numpy() == "")[:50]:
        problems.append((where, int(row) + 1, column, f"empty {column}"))
    return problems


def _check_values(table: pd.DataFrame | dict[str, np.ndarray], where: str, row_of) -> list[Problem]:
    """Range checks shared by long tables and dense arrays."""
    problems: list[Problem] = []
    rules = (
        ("correct", lambda v: np.isfinite(v) & (v >= 0) & (v <= 1), "must be in [0, 1]"),
        ("energy_j", lambda v: np.isfinite(v) & (v >= 0), "must be finite and >= 0 joules"),
        ("latency_s", lambda v: np.isfinite(v) & (v >= 0), "must be finite and >= 0 seconds"),
        ("mean_power_w", lambda v: np.isfinite(v) & (v >= 0), "must be finite and >= 0 watts"),
        ("input_tokens", lambda v: np.isnan(v) | (v >= 0), "must be >= 0 (or NaN when unknown)"),
        ("output_tokens", lambda v: np.isnan(v) | (v >= 0), "must be >= 0 (or NaN when unknown)"),
    )
    for name, ok, message in rules:
        values = np.asarray(table[name], dtype=np.float64).reshape(-1)
        bad = np.flatnonzero(~ok(values))
        for i in bad[:20]:
            problems.append((where, row_of(i), name, f"{float(values[i])!r} {message}"))
        if len(bad) > 20:
            problems.append((where, None, name, f"{len(bad)} values in all {message}"))
    return problems


def _validate(t: Tournament) -> list[Problem]:
    problems = _empty_tables(t.queries, t.models, f"{t.source} (queries)", f"{t.source} (models)")
    problems += _unique_ids(t.queries, "query_id", f"{t.source} (queries)")
    problems += _unique_ids(t.models, "model_id", f"{t.source} (models)")
    shape = (t.n_queries, t.n_models)
    for name in METRIC_ARRAYS:
        if getattr(t, name).shape != shape:
            problems.append((t.source, None, name, f"array shape {getattr(t, name).shape} != (queries, models) {shape}"))
    if t.output_text is not None and t.output_text.shape != shape:
        problems.append((t.source, None, "output_text", f"array shape {t.output_text.shape} != {shape}"))
    if problems:
        return problems
    k = max(t.n_models, 1)
    models = t.model_ids
    queries = t.query_ids

    def row_of(flat: int) -> str:  # type: ignore[override]
        return f"query {queries[flat // k]!r} x model {models[flat % k]!r}"

    for p in _check_values({n: getattr(t, n) for n in METRIC_ARRAYS}, f"{t.source} (outcomes)", row_of):
        file, where, column, message = p
        problems.append((file, None, column, f"{where}: {message}" if where else message))
    return problems + _check_tables(t.queries, t.models, f"{t.source} (queries)", f"{t.source} (models)")


def _check_tables(queries: pd.DataFrame, models: pd.DataFrame, queries_file: str, models_file: str) -> list[Problem]:
    problems: list[Problem] = []
    bad_prov = ~models["energy_provenance"].isin(ENERGY_PROVENANCES).to_numpy()
    for row in np.flatnonzero(bad_prov):
        problems.append(
            (models_file, int(row) + 1, "energy_provenance",
             f"{models['energy_provenance'].iloc[row]!r} is not one of {', '.join(ENERGY_PROVENANCES)}")
        )
    # _normalise_table turned a null benchmark into "": it must not become a benchmark named "".
    problems += _first_rows(queries_file, "benchmark", (queries["benchmark"] == "").to_numpy(),
                            lambda row: "empty or null benchmark")
    difficulty = queries["difficulty"].to_numpy(dtype=float)
    for row in np.flatnonzero(np.isfinite(difficulty) & ((difficulty < 0) | (difficulty > 1)))[:20]:
        problems.append((queries_file, int(row) + 1, "difficulty", f"{difficulty[row]} is outside [0, 1]"))
    return problems
