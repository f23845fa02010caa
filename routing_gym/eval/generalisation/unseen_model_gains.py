"""Gains of routers that meet models they never trained on (UniRoute's protocol, ``unseen_models``).

``unseen_model_gains`` fits each agent once on the seen pool (``hold_out_models(...).seen``), and
for every calibration size routes the whole pool's test questions: with 0 calibration questions
the agent routes among the seen models (a new model is undescribed); with n > 0 a copy of the
fitted agent receives the ``ModelDescription`` of the held-out models on n training questions
(``Agent.add_models``) first. An agent that cannot use a description (``UnseenModelsError``) gets a
row saying so, with no numbers. Every row is scored on the full pool under compare's reward:

- routing gain = accuracy - the fixed-model chain of the *full* pool (new models included: an
  "always <new model>" policy is a legitimate rival) chosen on the training split, at the row's
  mean joules (pp; ``eval/core/yardstick.py``), with a 95 % percentile interval over test questions
  (copies together, ``BootstrapPlan.of_rows``) and a Romano-Wolf verdict over every scored row
  (``eval/core/familywise.py``);
- new-model share: the fraction of test questions routed to a held-out model.
"""

from __future__ import annotations

import copy
import time
from typing import Any, Sequence

import numpy as np

from routing_gym.envs import ObservationBatch, Reward, RoutingEnv
from routing_gym.errors import UnseenModelsError
from routing_gym.eval.core import familywise
from routing_gym.eval.core.stats import BootstrapPlan, percentile_interval
from routing_gym.eval.core.yardstick import Yardstick
from routing_gym.eval.generalisation.unseen_models import hold_out_models
from routing_gym.tournament import Tournament


def unseen_model_gains(t: Tournament, agents: Sequence[str], held_out: Sequence[str], calibration_sizes: Sequence[int],
                       reward: Reward, seed: int = 0, n_bootstrap: int = 2000, confidence: float = 0.95,
                       calibration_seed: int = 0) -> list[dict[str, Any]]:
    """One row per agent x calibration size (module docstring)."""
    from routing_gym_agents import FitContext, make_agent

    splits = {n: hold_out_models(t, held_out, n, calibration_seed) for n in calibration_sizes if n > 0}
    any_split = next(iter(splits.values())) if splits else hold_out_models(t, held_out, 1, calibration_seed)
    seen, pool = any_split.seen, any_split.pool  # the same for every size: only the calibration rows differ
    test = pool.split_rows("test")
    env = RoutingEnv(tournament=pool, split="test", reward=reward.name, coefficients=reward.coefficients,
                     invalid_penalty=reward.invalid_penalty, allow_ungated=reward.allow_ungated, invalid_action="penalize",
                     order="sequential")
    train = pool.split_rows("train")
    chain = Yardstick.chosen_on_train(pool.energy_j[train].mean(axis=0), pool.correct[train].mean(axis=0), list(pool.model_ids))
    batch = ObservationBatch.from_tournament(pool, test)
    rows: list[dict[str, Any]] = []
    scored: list[tuple[int, np.ndarray, np.ndarray]] = []  # (row index, correct, joules) per query
    for name in agents:
        agent = make_agent(name)
        tic = time.perf_counter()
        agent.fit(FitContext(seen, reward, seed=seed, feedback=agent.feedback, progress=False))
        fit_s = time.perf_counter() - tic
        for n in calibration_sizes:
            row: dict[str, Any] = {"agent": name, "n_calibration": int(n), "held_out": ", ".join(held_out), "fit_s": fit_s}
            routed = agent
            if n > 0:
                routed = copy.deepcopy(agent)
                try:
                    routed.add_models(splits[n].description())
                except UnseenModelsError as exc:
                    rows.append({**row, "status": "cannot", "note": str(exc).split(";")[0]})
                    continue
            actions = np.asarray(routed.act_batch(batch))
            result = env.evaluate(actions)
            row.update(status="ok", note="" if n > 0 else "routes among the seen models (new models undescribed)",
                       accuracy=float(result.correct.mean()), mean_energy_j=float(result.energy_j.mean()),
                       new_model_share=float((actions >= seen.n_models).mean()))
            scored.append((len(rows), np.asarray(result.correct, float), np.asarray(result.energy_j, float)))
            rows.append(row)
    if not scored:
        return rows
    m = len(scored)
    block = np.concatenate([np.stack([c for _, c, _ in scored], axis=1), np.stack([j for _, _, j in scored], axis=1),
                            pool.correct[test], pool.energy_j[test]], axis=1)
    plan = BootstrapPlan.of_rows(pool.queries["prompt"].to_numpy()[test], n_bootstrap, seed)
    k = pool.n_models

    def gains(values: np.ndarray) -> np.ndarray:
        fixed_acc, fixed_j = values[..., None, 2 * m:2 * m + k], values[..., None, 2 * m + k:]
        return 100 * chain.gain(fixed_j, fixed_acc, values[..., m:2 * m], values[..., :m])

    point, boot = gains(block.mean(axis=0)), gains(plan.means(block))
    decision = familywise.stepdown(point, boot, 1 - confidence)
    low, high = percentile_interval(boot, confidence)
    for j, (i, _, _) in enumerate(scored):
        rows[i].update(routing_gain_pp=float(point[j]), routing_gain_pp_ci_low=float(low[j]),
                       routing_gain_pp_ci_high=float(high[j]), verdict=decision.decisions[j], chain=", ".join(chain.names))
    return rows


TABLE_HEADER = ["| agent | calibration questions | routing gain (pp) | 95 % CI | verdict | new-model share | accuracy | mean J |",
                "|---|---|---|---|---|---|---|---|"]


def describing_agents() -> list[str]:
    """The registered agents that can route to a model described by calibration answers only
    (``describes_new_models = True``): the default agents of ``compare --unseen-models``."""
    from routing_gym_agents.registry import AGENTS, list_agents

    return [name for name in list_agents() if getattr(AGENTS[name][0], "describes_new_models", False)]


def table_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The scored rows as a Markdown table (``TABLE_HEADER``); rows that could not run are left out."""
    return TABLE_HEADER + [
        f"| {r['agent']} | {r['n_calibration']} | {r['routing_gain_pp']:+.2f} | [{r['routing_gain_pp_ci_low']:+.2f}, "
        f"{r['routing_gain_pp_ci_high']:+.2f}] | {r['verdict'] or 'not distinguishable'} | {r['new_model_share']:.2f} | "
        f"{r['accuracy']:.3f} | {r['mean_energy_j']:.1f} |" for r in rows if r["status"] == "ok"]


def answer(rows: Sequence[dict[str, Any]]) -> str:
    """One line: at the largest calibration size, which agents route above or below the full pool's
    fixed-model chain, and how much of the test they send to the new models."""
    scored = [r for r in rows if r["status"] == "ok"]
    if not scored:
        return "**Answer:** no agent could route to the new models (none describes a new model)."
    size = max(r["n_calibration"] for r in scored)
    at = [r for r in scored if r["n_calibration"] == size]
    named = {d: [r["agent"] for r in at if r["verdict"] == d] for d in (familywise.ABOVE, familywise.BELOW)}
    return (f"**Answer:** with {size} calibration questions per new model, {len(named[familywise.ABOVE])} of {len(at)} "
            f"agents route above the full pool's fixed-model chain ({', '.join(named[familywise.ABOVE]) or 'none'}), "
            f"{len(named[familywise.BELOW])} below ({', '.join(named[familywise.BELOW]) or 'none'}); they send "
            f"{min(r['new_model_share'] for r in at):.0%}-{max(r['new_model_share'] for r in at):.0%} of the test "
            "questions to a new model (family-wise verdicts over every scored row, 95 %).")


def markdown(rows: Sequence[dict[str, Any]], tournament: str, held_out: Sequence[str], seed: int) -> str:
    """``compare --unseen-models``' unseen-models.md: the answer, the rule, the table."""
    cannot = {r["agent"]: r["note"] for r in rows if r["status"] != "ok"}
    chain = next((r["chain"] for r in rows if "chain" in r), "")
    return "\n".join([
        f"# Unseen models on {tournament}: {', '.join(held_out)} held out of training", "", answer(rows), "",
        "Each agent is fitted once on the other models (seed "
        f"{seed}), then routes the whole pool's test questions: with 0 calibration questions among the seen models "
        "only, with n > 0 after learning each new model from its answers to n training questions (UniRoute's protocol). "
        "Routing gain: accuracy minus the full pool's fixed-model chain chosen on train, at the row's mean joules (pp, "
        "95 % percentile interval over test questions, copies together); verdicts: Romano-Wolf step-down over every "
        "scored row (adding or removing agents can change them); new-model share: test questions routed to a held-out "
        f"model. Fixed-model chain of the full pool: {chain}.", "",
        *([f"Cannot use a description: {'; '.join(f'{a} ({n})' for a, n in cannot.items())}.", ""] if cannot else []),
        *table_lines(rows), ""])
