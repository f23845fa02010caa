"""The audit: a deployable row is verified, not declared.

Python cannot stop an agent from reading held-out outcomes by a road the contract does not
guard (rebuilding its tournament by name, a private attribute, the files on disk). The audit
*detects* it: ``compare`` fits and runs the agent a second time, with the same seed, on a copy
of the tournament whose held-out outcomes are replaced (``replaced_holdout``), while every
``resolve_tournament`` in the process that would return the original returns the copy
(``routing_gym.sources.substitute``). An agent that learns from the training split and routes
from observations gives the same actions both times; any action that changes means the actions
depend on held-out outcomes, and the row is not deployable.

What the copy changes, held-out rows only: within each model column the outcomes (correctness,
joules, seconds, watts, tokens, answer texts) are permuted across held-out queries, one
permutation per column, so no query keeps its own outcomes; then every held-out query's
outcomes move one model along (model k gets what model k+1 had), so no model keeps its
held-out means either (a router that picks the model best *on the test split* changes too).
The generator's latent ``difficulty`` of held-out queries is permuted as well. Texts,
benchmarks, ids, the training rows and every shape are unchanged.

What it cannot see: a dependence so coarse that the replaced outcomes give the same actions
(for example a choice between two models that the shift swaps into the same decision), reads
of *training* outcomes (legitimate: training data), and an agent that is not deterministic for
a given seed (its row then fails the audit: the suite's agents are checked to be
deterministic). Cost: one more fit and act per cell.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from routing_gym.sources import substitute
from routing_gym.tournament import Tournament
from routing_gym.tournament.schema import METRIC_ARRAYS

PASSED, FAILED, SKIPPED, OFF = "passed", "failed", "skipped", "off"
FAILED_LABEL = "no (actions depend on held-out outcomes)"
_copies: dict[tuple[str, str, int], Tournament] = {}  # the last copy built, per process


def replaced_holdout(t: Tournament, test_split: str, seed: int = 0) -> Tournament:
    """A copy of ``t`` whose held-out (``test_split``) outcomes are replaced (module docstring)."""
    key = (t.fingerprint, test_split, seed)
    if key in _copies:
        return _copies[key]
    rows = t.split_rows(test_split)
    rng = np.random.default_rng(seed)
    order = np.stack([rows[rng.permutation(len(rows))] for _ in range(t.n_models)], axis=1)  # [n_test, K]
    shifted = np.roll(order, -1, axis=1)  # model k gets model k+1's column
    source_model = np.roll(np.arange(t.n_models), -1)[None, :]
    changes: dict[str, Any] = {}
    for name in (*METRIC_ARRAYS, *(("output_text",) if t.output_text is not None else ())):
        values = np.array(getattr(t, name), copy=True)
        values[rows] = values[shifted, source_model]
        changes[name] = values
    queries = t.queries.copy()
    if t.has_difficulty:
        difficulty = queries["difficulty"].to_numpy(copy=True)
        difficulty[rows] = difficulty[rows[rng.permutation(len(rows))]]
        queries["difficulty"] = difficulty
    copy = Tournament(queries=queries, models=t.models, card=t.card, **changes)
    _copies.clear()
    _copies[key] = copy
    return copy


@dataclass
class AuditResult:
    """Whether an agent's held-out actions survived replacing the held-out outcomes."""

    status: str  # passed | failed | skipped | off
    changed: int = 0  # actions that differ between the two runs
    n: int = 0  # held-out queries routed
    seconds: float = 0.0  # wall time of the second fit and act
    reason: str = ""  # why it was skipped

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "changed": self.changed, "n": self.n, "seconds": self.seconds, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditResult:
        return cls(**data)


def audit_actions(fit_and_act: Callable[[Tournament], np.ndarray], t: Tournament, actions: np.ndarray,
                  test_split: str, seed: int) -> AuditResult:
    """Run ``fit_and_act`` (a fresh agent, fitted and routing the held-out split) on the
    replaced copy, with name resolution substituted, and compare its actions with ``actions``."""
    copy = replaced_holdout(t, test_split, seed)
    tic = time.perf_counter()
    with substitute(t, copy):
        audited = np.asarray(fit_and_act(copy))
    seconds = time.perf_counter() - tic
    actions = np.asarray(actions)
    changed = int(len(actions)) if audited.shape != actions.shape else int((audited != actions).sum())
    return AuditResult(FAILED if changed else PASSED, changed, int(len(actions)), seconds)


def deployable_label(declared_deployable: bool, audits: list[AuditResult]) -> str:
    """The Deployable column: ``yes`` only for a declared-deployable row whose every seed passed."""
    if not declared_deployable:
        return "no"
    if any(a.status == FAILED for a in audits):
        return FAILED_LABEL
    if audits and all(a.status == PASSED for a in audits):
        return "yes"
    reasons = sorted({a.reason or a.status for a in audits if a.status != PASSED}) or ["not audited"]
    return f"unverified ({'; '.join(reasons)})"


def row_fields(declared_deployable: bool, audits: list[dict[str, Any] | None], feedbacks: list[str]) -> dict[str, Any]:
    """A method's summary columns from its seeds' runs: ``deployable`` (declared and no seed
    failed the audit), ``deployable_label`` (the table's column), ``audit`` (worst status over
    seeds; changed actions, queries and seconds summed) and ``training_feedback``."""
    results = [AuditResult.from_dict(a) for a in audits if a is not None]
    label = deployable_label(declared_deployable, results)
    order = (FAILED, SKIPPED, OFF, PASSED)
    summary = {
        "status": min((r.status for r in results), key=order.index) if results else OFF,
        "changed": sum(r.changed for r in results), "n": sum(r.n for r in results),
        "seconds": float(sum(r.seconds for r in results)),
    }
    feedback = "full information" if "full information" in feedbacks else (feedbacks[0] if feedbacks else "")
    return {"deployable": declared_deployable and label != FAILED_LABEL, "deployable_label": label,
            "audit": summary, "training_feedback": feedback}
