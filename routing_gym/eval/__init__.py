"""Evaluation: per-policy metrics, bootstrap statistics, Pareto analysis and ``compare``.

- ``metrics``: accuracy, joules, latency, power, selection mix and collapse, reward under one
  stated coefficient setting, per-benchmark breakdown;
- ``stats``: bootstrap intervals over queries, spread over seeds, paired Pareto-dominance test;
- ``pareto``: Pareto frontier and hypervolume in (accuracy, joules);
- ``hull``: the fixed-model hull (random mixes of fixed models), routing gain, joules saved;
- ``compare``: train every agent on a tournament's training split, score it on the held-out
  split, write JSON/CSV/Markdown and PNG plots (``routing-gym compare``).

Importing this package stays light: scipy and matplotlib are imported inside functions.
"""

from routing_gym.eval.core.metrics import PolicyMetrics, policy_metrics, selection_entropy, selection_frequencies
from routing_gym.eval.core.pareto import hypervolume, pareto_front, weakly_dominates
from routing_gym.eval.core.stats import BootstrapPlan, DominanceTest, bootstrap_mean_ci, paired_dominance_test, seed_spread

__all__ = [
    "BootstrapPlan",
    "DominanceTest",
    "PolicyMetrics",
    "bootstrap_mean_ci",
    "hypervolume",
    "paired_dominance_test",
    "pareto_front",
    "policy_metrics",
    "seed_spread",
    "selection_entropy",
    "selection_frequencies",
    "weakly_dominates",
]
