"""Routing-gain study: when can a router beat a random mix of fixed models (the hull)?

Parts (each writes ``<part>.md`` and ``<part>.json`` under ``--out``; ``--parts`` picks some):

- ``calibration``: cross-model agreement of correctness within benchmarks (mean pairwise
  correlation, big-from-small AUC) and length AUC, procedural pools vs the real tournaments
  (``routing_gym.sources.specialization.calibration_statistics``).
- ``features``: held-out P(correct) AUC of a per-model logistic regression on e5 vs tfidf-svd
  features (64 text columns + benchmark one-hot), on paper-pool, zeroeval-math, llmrouter and
  specialist-pool (500-query train and test subsamples, see below).
- ``signal``: routing gain [95 % CI] of the learned default agents on ``specialist-pool``
  against ``specialization_signal`` (0, 0.25, 0.5, 0.75, 1).
- ``size``: routing gain against training-set size on ``specialist-pool-large`` (one fixed
  7,397-query test split; the first n training queries), and the crossover: the smallest size
  at which each agent's gain interval lies above 0.
- ``real``: routing gain of the default agents (tfidf-svd) on paper-pool, zeroeval-math and llmrouter.
- ``e5``: routing gain of knn / linucb / uniroute with e5 vs tfidf-svd features on the same four.

e5 embeddings are cached on disk by content (``routing_gym.features.E5Store``): a tournament is
embedded once. The e5 comparisons use seeded subsamples of 500 training and 500 test queries of
each tournament (both feature kinds alike), because embedding cost ~0.25-0.8 s per question on the
shared cores here.

    OMP_NUM_THREADS=1 ROUTING_GYM_DATA_DIR=../shared/data python experiments/routing_gain_study.py
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from routing_gym.eval.compare import CompareConfig, run_compare
from routing_gym.sources import resolve_tournament
from routing_gym.sources.specialization import calibration_statistics
from routing_gym.sources.synthetic import generate, preset_config
from routing_gym.tournament import Tournament
from results_readme import write_readme  # experiments/results_readme.py

OUT = Path(__file__).parent / "results" / "routing_gain"
LEARNED = ("linucb", "epsilon-greedy", "thompson", "knn", "uniroute", "routellm", "greenserv")
SIGNALS = (0.0, 0.25, 0.5, 0.75, 1.0)
TRAIN_SIZES = (250, 500, 1000, 2000, 4000, 8000, 16603)
SIZE_AGENTS = ("knn", "epsilon-greedy", "thompson", "uniroute")
E5_AGENTS = ("knn", "linucb", "uniroute")
REAL = ("paper-pool", "zeroeval-math", "llmrouter")
FEATURE_POOLS = (*REAL, "specialist-pool")  # where text carries per-model signal, for contrast
E5_CAP = 500
FEATURE_DIM = 64


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def e5_tournament(name: str) -> Tournament:
    """The tournament the e5 comparisons use: seeded subsamples of at most ``E5_CAP`` training
    and ``E5_CAP`` test queries (a prefix of one permutation, so a smaller cap is a subset)."""
    t = resolve_tournament(name)
    rng = np.random.default_rng(0)
    keep = [rng.permutation(t.split_rows(split))[:E5_CAP] for split in ("train", "test")]
    return t.subset(rows=np.sort(np.concatenate(keep)))


def gain_rows(result: Any, suffix: str = "") -> list[dict[str, Any]]:
    """One record per method: accuracy, joules and routing gain with its interval."""
    rows = []
    for r in result.rows:
        if not r.get("seeds_ok"):
            rows.append({"method": r["method"] + suffix, "error": r.get("error", "failed")})
            continue
        rows.append({
            "method": r["method"] + suffix, "kind": r["kind"], "deployable": r["deployable"],
            "accuracy": r["accuracy"], "mean_energy_j": r["mean_energy_j"],
            "gain_pp": r["routing_gain_pp"], "gain_low": r["routing_gain_pp_ci_low"],
            "gain_high": r["routing_gain_pp_ci_high"], "gain_vs": r["routing_gain_pp_vs"],
        })
    return rows


def compare(t: Tournament, agents: tuple[str, ...], seeds: int, bootstrap: int, **kwargs: Any) -> Any:
    return run_compare(CompareConfig(tournament=t, agents=list(agents), seeds=seeds, n_bootstrap=bootstrap,
                                     progress=False, **kwargs))


def fmt_gain(row: dict[str, Any]) -> str:
    if "error" in row:
        return "failed"
    mark = "" if row.get("gain_vs", "within") == "within" else " *"
    return f"{row['gain_pp']:+.1f} [{row['gain_low']:+.1f}, {row['gain_high']:+.1f}]{mark}"


# ---------------------------------------------------------------------- parts
def part_calibration(args: argparse.Namespace) -> tuple[str, Any]:
    pools = {
        "paper-pool (procedural, shipped)": resolve_tournament("paper-pool"),
        "specialist-pool, signal 0": generate(preset_config("specialist-pool", specialization_signal=0.0)),
        "specialist-pool, signal 1 (preset)": generate(preset_config("specialist-pool")),
        "zeroeval-math (real)": resolve_tournament("zeroeval-math"),
        "llmrouter (real)": resolve_tournament("llmrouter"),
    }
    stats = {name: calibration_statistics(t) for name, t in pools.items()}
    lines = ["# Calibration: procedural vs real tournaments", "",
             "Within each benchmark, averaged by benchmark size (`calibration_statistics`). Correlation: mean pairwise "
             "Pearson correlation of correctness across models. Big-from-small AUC: cross-validated AUC of predicting the "
             "largest model's correctness from the smaller half of the pool. Length AUC: AUC of prompt length for a wrong "
             "answer, mean over models. All derived from the tournaments' outcome tables.", "",
             "| Tournament | Queries | Models | Correlation | Big-from-small AUC | Length AUC | Mean accuracy |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, s in stats.items():
        lines.append(f"| {name} | {s['n_queries']} | {s['n_models']} | {s['correlation']:.3f} | "
                     f"{s['big_from_small_auc']:.3f} | {s['length_auc']:.3f} | {s['mean_accuracy']:.3f} |")
    return "\n".join(lines) + "\n", stats


def held_out_auc(t: Tournament, kind: str) -> dict[str, float]:
    """Mean over models of the held-out AUC of P(correct | features), and the benchmark-only baseline."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    from routing_gym.envs.observation import ObservationBatch
    from routing_gym.features import fit_featurizer

    train, test = t.split_rows("train"), t.split_rows("test")
    featurizer = fit_featurizer(ObservationBatch.from_tournament(t, train), kind=kind, dim=FEATURE_DIM,
                                n_benchmarks=len(t.benchmarks), extra_keys=())
    X = featurizer.transform(ObservationBatch.from_tournament(t, np.arange(t.n_queries)))
    correct = (np.asarray(t.correct) >= 0.5).astype(int)
    out: dict[str, list[float]] = {"features": [], "benchmark_only": []}
    for j in range(t.n_models):
        y = correct[:, j]
        if not (0 < y[train].sum() < len(train) and 0 < y[test].sum() < len(test)):
            continue
        for label, cols in (("features", slice(None)), ("benchmark_only", slice(FEATURE_DIM, None))):
            clf = LogisticRegression(max_iter=2000).fit(X[train][:, cols], y[train])
            out[label].append(roc_auc_score(y[test], clf.predict_proba(X[test][:, cols])[:, 1]))
    return {k: float(np.mean(v)) for k, v in out.items()}


def part_features(args: argparse.Namespace) -> tuple[str, Any]:
    results = {}
    for name in FEATURE_POOLS:
        t = e5_tournament(name)
        results[name] = {kind: held_out_auc(t, kind) for kind in ("tfidf-svd", "e5")}
        results[name]["n_train"] = int(len(t.split_rows("train")))
        results[name]["n_test"] = int(len(t.split_rows("test")))
        log(f"features {name}: {results[name]}")
    lines = ["# Held-out P(correct) AUC: e5 vs tfidf-svd", "",
             f"Per model, a logistic regression on {FEATURE_DIM} text columns + the benchmark one-hot, fitted on a "
             f"seeded {E5_CAP}-query subsample of the training split (both kinds alike), scored on a seeded "
             f"{E5_CAP}-query subsample of the test split; the mean over models (derived).", "",
             "| Tournament | Train / test | Benchmark only | tfidf-svd | e5 |", "|---|---:|---:|---:|---:|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['n_train']} / {r['n_test']} | {r['tfidf-svd']['benchmark_only']:.3f} | "
                     f"{r['tfidf-svd']['features']:.3f} | {r['e5']['features']:.3f} |")
    return "\n".join(lines) + "\n", results


def part_signal(args: argparse.Namespace) -> tuple[str, Any]:
    table: dict[float, list[dict[str, Any]]] = {}
    for signal in SIGNALS:
        t = generate(preset_config("specialist-pool", specialization_signal=signal))
        table[signal] = gain_rows(compare(t, ("random", "oracle", *LEARNED), args.seeds, args.bootstrap))
        log(f"signal {signal}: " + ", ".join(f"{r['method']} {fmt_gain(r)}" for r in table[signal] if r.get("kind") == "agent"))
    agents = [r["method"] for r in table[SIGNALS[0]] if r.get("kind") == "agent"]
    n_train, n_test = (len(t.split_rows(split)) for split in ("train", "test"))
    lines = ["# Routing gain against specialization_signal (specialist-pool)", "",
             f"specialist-pool ({t.n_queries:,} queries, {n_train:,} train / {n_test:,} test), {args.seeds} seeds per agent; routing gain in pp "
             "over the fixed-model hull at the agent's mean joules, paired 95 % bootstrap interval "
             "(`*`: outside the hull's joule range, compared with the nearest end point). Oracle is not deployable.", "",
             "| Agent | " + " | ".join(f"s = {s:g}" for s in SIGNALS) + " |", "|---|" + "---:|" * len(SIGNALS)]
    for agent in agents:
        cells = [fmt_gain(next(r for r in table[s] if r["method"] == agent)) for s in SIGNALS]
        lines.append(f"| {agent} | " + " | ".join(cells) + " |")
    plot_signal(table, agents, args.out / "signal.png")
    return "\n".join(lines) + "\n", {str(k): v for k, v in table.items()}


def plot_signal(table: dict[float, list[dict[str, Any]]], agents: list[str], path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for agent in agents:
        if agent == "oracle":
            continue
        rows = [next(r for r in table[s] if r["method"] == agent) for s in SIGNALS]
        ok = [(s, r) for s, r in zip(SIGNALS, rows) if "error" not in r]
        xs = [s for s, _ in ok]
        ys = np.array([r["gain_pp"] for _, r in ok])
        err = np.array([[r["gain_pp"] - r["gain_low"], r["gain_high"] - r["gain_pp"]] for _, r in ok]).T
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=agent)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("specialization_signal")
    ax.set_ylabel("routing gain over the fixed-model hull (pp)")
    ax.set_title("specialist-pool: gain [95% CI] by specialization")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def with_train_size(t: Tournament, n_train: int) -> Tournament:
    """``t`` with only the first ``n_train`` training queries labelled train (the rest unused)."""
    queries = t.queries.copy()
    train = t.split_rows("train")
    queries.loc[train[n_train:], "split"] = "unused"
    return replace(t, queries=queries)


def part_size(args: argparse.Namespace) -> tuple[str, Any]:
    t = generate(preset_config("specialist-pool-large"))
    table: dict[int, list[dict[str, Any]]] = {}
    for n in TRAIN_SIZES:
        table[n] = gain_rows(compare(with_train_size(t, n), SIZE_AGENTS, 1, args.bootstrap))
        log(f"train size {n}: " + ", ".join(f"{r['method']} {fmt_gain(r)}" for r in table[n] if r.get("kind") == "agent"))
    return size_report(table, len(t.split_rows("test")))


def size_report(table: dict[int, list[dict[str, Any]]], n_test: int) -> tuple[str, Any]:
    """The size table and each agent's crossover: the smallest training size from which its
    gain interval lies above 0 at that size and at every larger one."""
    sizes = sorted(table)
    crossover: dict[str, int | None] = {}
    for agent in SIZE_AGENTS:
        above = [next(r for r in table[n] if r["method"] == agent).get("gain_low", -1) > 0 for n in sizes]
        from_here = [n for i, n in enumerate(sizes) if all(above[i:])]
        crossover[agent] = from_here[0] if from_here else None
    lines = ["# Routing gain against training-set size (specialist-pool-large)", "",
             f"specialist-pool-large (24,000 queries), one fixed test split of {n_test:,} queries; the agents train on "
             "the first n training queries; 1 seed; gain pp [95 % CI] over the fixed-model hull. Crossover: the smallest "
             "n from which the interval lies above 0 at that n and every larger one.", "",
             "| Agent | " + " | ".join(f"n = {n:,}" for n in sizes) + " | Crossover |",
             "|---|" + "---:|" * (len(sizes) + 1)]
    for agent in SIZE_AGENTS:
        cells = [fmt_gain(next(r for r in table[n] if r["method"] == agent)) for n in sizes]
        lines.append(f"| {agent} | " + " | ".join(cells) + f" | {f'{crossover[agent]:,}' if crossover[agent] else 'none'} |")
    return "\n".join(lines) + "\n", {"table": {str(k): v for k, v in table.items()}, "crossover": crossover, "n_test": n_test}


def part_real(args: argparse.Namespace) -> tuple[str, Any]:
    results = {name: gain_rows(compare(resolve_tournament(name), ("oracle", "random", *LEARNED), args.seeds, args.bootstrap))
               for name in REAL}
    text = gain_tables(
        "# Routing gain on the shipped and real tournaments (tfidf-svd features)",
        f"Default agents, {args.seeds} seeds each, full training splits; gain pp over the fixed-model hull at the agent's "
        "mean joules [paired 95 % CI] (`*`: outside the hull's range, nearest end point).", results)
    return text, results


def part_e5(args: argparse.Namespace) -> tuple[str, Any]:
    kwargs = {agent: {"features": "e5", "dim": FEATURE_DIM} for agent in E5_AGENTS}
    results = {}
    for name in FEATURE_POOLS:
        t = e5_tournament(name)
        results[name] = (gain_rows(compare(t, E5_AGENTS, args.seeds, args.bootstrap), " [tfidf-svd]")
                         + gain_rows(compare(t, E5_AGENTS, args.seeds, args.bootstrap, agent_kwargs=kwargs), " [e5]"))
        log(f"e5 {name}: " + ", ".join(f"{r['method']} {fmt_gain(r)}" for r in results[name] if r.get("kind") == "agent"))
    text = gain_tables(
        "# Routing gain with e5 vs tfidf-svd features",
        f"{', '.join(E5_AGENTS)} with each feature kind ({FEATURE_DIM} text columns), trained on a seeded "
        f"{E5_CAP}-query subsample of the training split, tested on a seeded {E5_CAP}-query subsample of the test "
        f"split; {args.seeds} seeds; "
        "gain pp over the fixed-model hull [paired 95 % CI].", results)
    return text, results


def gain_tables(title: str, intro: str, results: dict[str, list[dict[str, Any]]]) -> str:
    lines = [title, "", intro, ""]
    for name, rows in results.items():
        lines += [f"## {name}", "", "| Method | Deployable | Accuracy % | Mean J | Routing gain pp [95% CI] |",
                  "|---|---|---:|---:|---:|"]
        lines += [f"| {r['method']} | {'yes' if r['deployable'] else 'no'} | {100 * r['accuracy']:.1f} | "
                  f"{r['mean_energy_j']:,.1f} | {fmt_gain(r)} |" for r in rows if r.get("kind") == "agent"]
        lines.append("")
    return "\n".join(lines)


def part_cost_aware(args: argparse.Namespace) -> tuple[str, Any]:
    """The cost-aware agent's operating-point curve (``routing_gym.eval.frontier``): its mean gain
    over the hull along the curve (curve area / joule range), by signal and on the real tournaments."""
    from routing_gym.eval.frontier import FrontierConfig, run_frontier
    from routing_gym_agents import list_agents

    if "cost-aware" not in list_agents():
        return "# Cost-aware agent\n\nNo `cost-aware` agent is registered in this checkout: no curve area.\n", {}
    pools = {f"specialist-pool, s = {s:g}": generate(preset_config("specialist-pool", specialization_signal=s)) for s in SIGNALS}
    pools.update({name: resolve_tournament(name) for name in REAL})
    results = {}
    for label, t in pools.items():
        curve = run_frontier(FrontierConfig(tournament=t, agents=["cost-aware"], n_bootstrap=args.bootstrap,
                                            progress=False)).curves[0]
        results[label] = {"error": curve.error, **curve.summary,
                          "points": [{"mu": p.value, "accuracy": p.test_accuracy, "energy_j": p.test_energy_j,
                                      **p.stats} for p in curve.selected]}
        log(f"cost-aware {label}: {curve.summary}")
    lines = ["# Cost-aware agent: mean gain of its operating-point curve over the hull", "",
             "`routing_gym.eval.frontier.run_frontier` with the default knob grid (mu, the price of joules): the "
             "agent trains on 80 % of the training split, the curve's points are the mu values Pareto-optimal on the "
             "other 20 % (validation), and each point is scored on the test split. Mean gain = area between the "
             "curve (read as its own hull) and the fixed-model hull over their common joule range / its width, pp "
             "[paired 95 % CI] (derived).", "",
             "| Tournament | Points | Joule range | Mean gain pp [95% CI] | Area pp·J |", "|---|---:|---:|---:|---:|"]
    for label, r in results.items():
        if r.get("error") or "mean_gain_pp" not in r:
            lines.append(f"| {label} | | | {r.get('error') or r.get('note', 'no area')} | |")
            continue
        low, high = r["joule_range"]
        ci = (f" [{r['mean_gain_pp_ci_low']:+.1f}, {r['mean_gain_pp_ci_high']:+.1f}]"
              if "mean_gain_pp_ci_low" in r else "")
        lines.append(f"| {label} | {r['n_points']} | {low:,.0f}–{high:,.0f} J | {r['mean_gain_pp']:+.1f}{ci} | "
                     f"{r['area_pp_j']:,.0f} |")
    return "\n".join(lines) + "\n", results


PARTS = {"calibration": part_calibration, "features": part_features, "signal": part_signal, "size": part_size,
         "real": part_real, "e5": part_e5, "cost_aware": part_cost_aware}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of: {', '.join(PARTS)}")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part(s) {unknown}; parts: {', '.join(PARTS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for part in parts:
        tic = time.perf_counter()
        log(f"part {part} ...")
        text, data = PARTS[part](args)
        (args.out / f"{part}.md").write_text(text)
        (args.out / f"{part}.json").write_text(json.dumps(_jsonable(data), indent=1, sort_keys=True) + "\n")
        print(text)
        log(f"part {part}: {time.perf_counter() - tic:.0f} s")
    write_readme(args.out, "When can a router beat a random mix of fixed models?",
                 f"This run wrote the parts {', '.join(parts)} (`<part>.md`, `<part>.json`).\n\n{__doc__}")
    return 0


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return None if not math.isfinite(float(value)) else float(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    return value


if __name__ == "__main__":
    sys.exit(main())
