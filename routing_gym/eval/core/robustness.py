"""Does a verdict depend on how the joules were derived? The same actions under other energy laws.

A derived tournament's joules come from an energy law (``routing_gym/sources/energy_model.py``);
each build also records, per model, its per-token coefficients under the alternative laws
(``serving["energy_alternatives"]``: ``batched``, ``law``, ``params``, ``batch1``). Re-pricing is
an ``[n, K]`` energy array per law (input tokens x prefill J + output tokens x decode J); every
method's actions stay what they were, so a run's cells are reused and nothing is refitted.

Under each law this module chooses the fixed-model yardstick on the training split re-priced under
that law (``eval/core/yardstick.py``), and recomputes every method's routing gain with its paired
bootstrap interval (the run's own resamples) and its verdict:

- agents, and fixed models off the chain: ``routes`` (gain interval above 0), ``below`` (below 0),
  ``indistinguishable``;
- fixed models the chain passes through: ``on the hull``;
- agents the audit failed or did not verify: ``no verdict (not verified)``, gains kept.

A verdict is *robust* when it is the same under every law. What it does not do: refit agents
under another law (an agent trained on other joules could act differently; this is the
question "would the same behaviour be judged the same", not "would training end the same").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from routing_gym.eval.core.stats import BootstrapPlan, percentile_interval
from routing_gym.eval.core.yardstick import Yardstick
from routing_gym.sources.energy_model import ALTERNATIVE_ENERGY_MODELS
from routing_gym.tournament import Tournament

ROUTES, BELOW, INDISTINGUISHABLE = "routes", "below", "indistinguishable"
NO_VERDICT = "no verdict (not verified)"  # a method the audit failed or did not verify (eval/execution/audit.py)
ON_HULL = "on the hull"  # a fixed model the law's train-chosen chain passes through


def energy_under_laws(t: Tournament, rows: np.ndarray) -> dict[str, np.ndarray]:
    """``[n, K]`` joules of ``rows`` under every alternative law all models record ({} when none)."""
    alternatives = [s.get("energy_alternatives") if isinstance(s, dict) else None for s in t.models["serving"]]
    if not alternatives or not all(alternatives):
        return {}
    known = [law for law in ALTERNATIVE_ENERGY_MODELS if law in alternatives[0]]  # the canonical order first
    laws = [law for law in known + sorted(set(alternatives[0]) - set(known)) if all(law in a for a in alternatives)]
    out = {}
    for law in laws:
        decode = np.array([a[law]["joules_per_output_token"] for a in alternatives])
        prefill = np.array([a[law]["prefill_joules_per_input_token"] for a in alternatives])
        out[law] = t.output_tokens[rows] * decode + t.input_tokens[rows] * prefill
    return out


def _gather(actions: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per-query values of ``[S, n]`` actions, mean over seeds; an invalid action scores 0 (the scorer's rule)."""
    k = values.shape[1]
    valid = (actions >= 0) & (actions < k)
    picked = np.take_along_axis(values[None, :, :], np.where(valid, actions, 0)[..., None], axis=2)[..., 0]
    return np.where(valid, picked, 0.0).mean(axis=0)


@dataclass
class LawVerdicts:
    """One law's hull and every method's gain (pp, with its interval) and verdict."""

    law: str
    hull_models: list[str]
    gain_pp: dict[str, tuple[float, float, float]]  # method -> (point, low, high)
    verdicts: dict[str, str]


@dataclass
class Robustness:
    """Verdicts of the same actions under every law; ``robust[m]`` is True when all agree."""

    laws: list[str]
    per_law: dict[str, LawVerdicts]
    robust: dict[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        methods = next(iter(self.per_law.values())).verdicts
        self.robust = {m: len({self.per_law[law].verdicts[m] for law in self.laws}) == 1 for m in methods}

    @property
    def fragile(self) -> list[str]:
        return [m for m, ok in self.robust.items() if not ok]

    def to_dict(self) -> dict[str, Any]:
        return {
            "laws": self.laws,
            "hull_models": {law: v.hull_models for law, v in self.per_law.items()},
            "methods": [{"method": m, "robust": ok,
                         **{f"verdict_{law}": self.per_law[law].verdicts[m] for law in self.laws},
                         **{f"gain_pp_{law}": self.per_law[law].gain_pp[m][0] for law in self.laws}}
                        for m, ok in self.robust.items()],
        }

    def markdown_lines(self) -> list[str]:
        return markdown_lines(self.to_dict())


def markdown_lines(summary: dict[str, Any]) -> list[str]:
    """A table of verdicts per law and the hull vertices under each, from :meth:`Robustness.to_dict`
    (so a result read back from JSON renders the same)."""
    laws = summary["laws"]
    lines = ["## Verdicts under other energy laws", "",
             "The same actions re-priced under each energy law the tournament records (routing_gym/eval/core/robustness.py; "
             "verdict and routing gain in pp); robust = the same verdict under every law.", "",
             "| Method | " + " | ".join(laws) + " | robust |", "|---|" + "---|" * (len(laws) + 1)]
    for row in summary["methods"]:
        cells = [f"{row[f'verdict_{law}']} ({row[f'gain_pp_{law}']:+.1f})" for law in laws]
        lines.append(f"| {row['method']} | " + " | ".join(cells) + f" | {'yes' if row['robust'] else '**no**'} |")
    fragile = [row["method"] for row in summary["methods"] if not row["robust"]]
    lines += ["", *[f"- hull under {law}: {' → '.join(models)}" for law, models in summary["hull_models"].items()],
              f"- verdicts that depend on the energy law: {', '.join(fragile) or 'none'}", ""]
    return lines


def verdict_robustness(correct: np.ndarray, energies: dict[str, np.ndarray], actions: dict[str, np.ndarray],
                       model_ids: list[str], plan: BootstrapPlan, confidence: float = 0.95,
                       fixed: dict[str, int] | None = None, withheld: set[str] | frozenset[str] = frozenset(), *,
                       train: tuple[np.ndarray, dict[str, np.ndarray]]) -> Robustness:
    """Verdicts of every method under every law.

    ``correct``: ``[n, K]`` of the evaluated rows; ``energies``: law -> ``[n, K]`` joules;
    ``train``: the training rows' ``[m, K]`` correctness and law -> joules, where each law's
    yardstick is chosen;
    ``actions``: method -> ``[S, n]`` (or ``[n]``) model indices; ``fixed``: method -> model index
    of the fixed-model rows (their verdict is hull membership, not an interval); ``withheld``:
    methods whose gains are reported with ``NO_VERDICT`` (not verified by the audit).
    """
    fixed = fixed or {}
    acts = {m: np.atleast_2d(np.asarray(a, dtype=np.int64)) for m, a in actions.items()}
    accuracy = {m: _gather(a, correct) for m, a in acts.items()}
    per_law = {}
    for law, energy in energies.items():
        joules = {m: _gather(a, energy) for m, a in acts.items()}
        fixed_acc, fixed_j = correct.mean(axis=0), energy.mean(axis=0)
        stick = Yardstick.chosen_on_train(train[1][law].mean(axis=0), train[0].mean(axis=0), list(model_ids))
        vertices = set(int(i) for i in stick.index)
        methods = list(acts)
        boot = plan.means(np.column_stack([accuracy[m] for m in methods] + [joules[m] for m in methods]
                                          + [correct, energy]))
        n_m, k = len(methods), correct.shape[1]
        boot_acc, boot_j = boot[:, 2 * n_m:2 * n_m + k], boot[:, 2 * n_m + k:]
        gains, verdicts = {}, {}
        for i, m in enumerate(methods):
            point = 100 * float(stick.gain(fixed_j, fixed_acc, joules[m].mean(), accuracy[m].mean()))
            point = 0.0 if abs(point) < 1e-7 else point  # a chain policy's own gain, up to rounding
            resampled = 100 * stick.gain(boot_j, boot_acc, boot[:, n_m + i], boot[:, i])
            low, high = (float(v) for v in percentile_interval(resampled, confidence))
            gains[m] = (point, low, high)
            if m in withheld:
                verdicts[m] = NO_VERDICT
            elif fixed.get(m, -1) in vertices:
                verdicts[m] = ON_HULL
            else:
                verdicts[m] = ROUTES if low > 0 else BELOW if high < 0 else INDISTINGUISHABLE
        per_law[law] = LawVerdicts(law, stick.names, gains, verdicts)
    return Robustness(list(energies), per_law)


def robustness_of_runs(t: Tournament, test_rows: np.ndarray, runs: list[Any], plan: BootstrapPlan,
                       confidence: float = 0.95, withheld: set[str] | frozenset[str] = frozenset(), *,
                       train_rows: np.ndarray) -> Robustness | None:
    """:func:`verdict_robustness` of a comparison's runs (``compare``'s ``RunRecord``: ``method``,
    ``kind``, ``status``, ``per_query["actions"]``); None when the tournament records fewer than
    two energy laws (measured and synthetic tournaments have one). Methods in ``withheld`` (audit
    failed or unverified: ``audit.withheld``) keep their gains and get ``NO_VERDICT``."""
    energies = energy_under_laws(t, test_rows)
    if len(energies) < 2:
        return None
    actions: dict[str, list[np.ndarray]] = {}
    for r in runs:
        if r.status == "ok":
            actions.setdefault(r.method, []).append(np.asarray(r.per_query["actions"], dtype=np.int64))
    fixed = {r.method: int(actions[r.method][0][0]) for r in runs if r.kind == "fixed-model" and r.method in actions}
    return verdict_robustness(t.correct[test_rows], energies, {m: np.stack(a) for m, a in actions.items()},
                              t.model_ids, plan, confidence, fixed=fixed, withheld=withheld,
                              train=(t.correct[train_rows], energy_under_laws(t, train_rows)))
