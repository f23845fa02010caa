"""Off-policy evaluation study: how well IPS, SNIPS, the direct method and doubly robust
estimate a router's held-out value from logged bandit feedback, against the exact value the
full tournament gives.

On the held-out split, a logging policy reveals one model's outcome per query
(``routing_gym.eval.offline.ope``); each estimator then estimates, for several target policies, three
metrics at once: the reward (``gated_rank``, ``lambda_e`` 0.4, compare's common setting),
accuracy and mean joules. Repeating the log over ``--seeds`` gives each estimator's bias
(with a 95 % interval over seeds), standard deviation, RMSE and the coverage of its own
nominal 95 % interval.

- Logging policies: **uniform** over the K models, and **epsilon-greedy** (``--epsilon``,
  default 0.2) around the per-benchmark best model (a typical production router).
- Target policies: a **LinUCB** router trained on the training split, **always
  qwen2.5-7b** (the paper's strong fixed baseline; the median-cost model of other pools) and the
  **per-benchmark best** model (the epsilon-greedy logger's own base policy).
- DM/DR regressors: scikit-learn (``--regressor ridge`` on the shared text features crossed
  with the model one-hot, or ``gbm``); DR is 2-fold cross-fitted.

Outputs under ``--out`` (default ``experiments/results/ope/<tournament>/``): ``trials.csv``
(every seed), ``summary.csv``, ``table.md`` and ``ope.png`` (relative error per estimator).

    OMP_NUM_THREADS=1 python experiments/ope_study.py                # ~1 min
    OMP_NUM_THREADS=1 python experiments/ope_study.py --regressor gbm --seeds 50
    OMP_NUM_THREADS=1 python experiments/ope_study.py --minari routing-gym/paper-pool/uniform-v0   # a dataset's log
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pandas as pd

from routing_gym.envs import Reward
from routing_gym.eval.offline.ope import ESTIMATORS, REGRESSORS, epsilon_greedy_logging, ope_trials, summarize_trials, uniform_logging
from routing_gym.features import fit_featurizer
from routing_gym.sources import resolve_tournament
from routing_gym.tournament import Tournament
from routing_gym_agents import FitContext, ObservationBatch, make_agent
from results_readme import write_index, write_readme  # experiments/results_readme.py

RESULTS = Path(__file__).resolve().parent / "results" / "ope"
REWARD = Reward("gated_rank", {"lambda_e": 0.4})
PREFERRED_FIXED = "qwen2.5-7b"
METRIC_LABELS = {"reward": f"reward {REWARD.describe()}", "accuracy": "accuracy", "energy_j": "mean joules"}


def per_benchmark_best(t: Tournament, rows: np.ndarray) -> np.ndarray:
    """For each query in ``rows``: the model with the best mean training reward on its benchmark."""
    train = t.split_rows("train")
    reward = REWARD.matrix(t, train)
    codes = t.benchmark_codes
    best = {b: int(np.argmax(reward[codes[train] == b].mean(axis=0))) for b in np.unique(codes[train])}
    fallback = int(np.argmax(reward.mean(axis=0)))
    return np.array([best.get(int(c), fallback) for c in codes[rows]], dtype=np.int64)


def targets(t: Tournament, rows: np.ndarray) -> dict[str, np.ndarray]:
    agent = make_agent("linucb")
    agent.fit(FitContext(t, REWARD, seed=0))
    if PREFERRED_FIXED in t.model_ids:
        fixed = PREFERRED_FIXED
    else:  # the pool's median-cost model on the training split
        joules = t.energy_j[t.split_rows("train")].mean(axis=0)
        fixed = t.model_ids[int(np.argsort(joules)[t.n_models // 2])]
    return {
        "linucb": np.asarray(agent.act_batch(ObservationBatch.from_tournament(t, rows)), dtype=np.int64),
        f"always {fixed}": np.full(len(rows), t.model_index(fixed), dtype=np.int64),
        "per-benchmark best": per_benchmark_best(t, rows),
    }


def plot(trials: pd.DataFrame, title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loggings, metrics = list(dict.fromkeys(trials["logging"])), list(dict.fromkeys(trials["metric"]))
    target_names = list(dict.fromkeys(trials["target"]))
    fig, axes = plt.subplots(len(loggings), len(metrics), figsize=(5.2 * len(metrics), 3.9 * len(loggings)), squeeze=False)
    colours = matplotlib.colormaps["tab10"].colors
    for i, logging in enumerate(loggings):
        for j, metric in enumerate(metrics):
            ax = axes[i, j]
            data, positions, colour = [], [], []
            for ti, target in enumerate(target_names):
                for ei, estimator in enumerate(ESTIMATORS):
                    sel = trials[(trials["logging"] == logging) & (trials["metric"] == metric) & (trials["target"] == target) & (trials["estimator"] == estimator)]
                    data.append(100 * sel["error"] / np.abs(sel["truth"]))
                    positions.append(ti * (len(ESTIMATORS) + 1) + ei)
                    colour.append(colours[ei])
            box = ax.boxplot(data, positions=positions, widths=0.7, patch_artist=True, showfliers=False, whis=(2.5, 97.5))
            for patch, c in zip(box["boxes"], colour):
                patch.set_facecolor(c)
                patch.set_alpha(0.6)
            ax.axhline(0, color="k", lw=0.8)
            centres = [ti * (len(ESTIMATORS) + 1) + (len(ESTIMATORS) - 1) / 2 for ti in range(len(target_names))]
            ax.set_xticks(centres, target_names, fontsize=8)
            ax.set_title(f"{logging} logging: {METRIC_LABELS.get(metric, metric)}", fontsize=9)
            if j == 0:
                ax.set_ylabel("error / |true value| % (box: IQR, whiskers: 95%)", fontsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[e], alpha=0.6) for e in range(len(ESTIMATORS))]
    fig.legend(handles, [e.upper() for e in ESTIMATORS], loc="upper right", ncol=len(ESTIMATORS), fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(summary: pd.DataFrame, header: str) -> str:
    lines = [header, "", "| logging | target | metric | estimator | true value | bias [95% CI over seeds] | sd | RMSE | coverage of own 95% CI |",
             "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for _, r in summary.iterrows():
        fmt = ",.1f" if r["metric"] == "energy_j" else ".4f"
        cover = "—" if np.isnan(r["coverage95"]) else f"{r['coverage95']:.2f}"
        lines.append(
            f"| {r['logging']} | {r['target']} | {r['metric']} | {r['estimator'].upper()} | {format(r['truth'], fmt)} "
            f"| {format(r['bias'], fmt)} [{format(r['bias_ci_low'], fmt)}, {format(r['bias_ci_high'], fmt)}] "
            f"| {format(r['sd'], fmt)} | {format(r['rmse'], fmt)} | {cover} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tournament", default="default", help="preset name or tournament directory")
    parser.add_argument("--seeds", type=int, default=200, help="simulated logs per logging policy")
    parser.add_argument("--epsilon", type=float, default=0.2)
    parser.add_argument("--regressor", choices=REGRESSORS, default="ridge")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--minari", default=None, metavar="DATASET_ID",
                        help="estimate from this Minari dataset's log (`data export --format minari`) instead of "
                             "simulated ones: its tournament, split, logging policy and seed")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    offline = None
    if args.minari:
        import minari

        from routing_gym.eval.offline.dataset import logged_data

        offline = logged_data(minari.load_dataset(args.minari))
        if offline.settings["split"] != "test" or offline.settings["tournament_spec"] is None:
            raise SystemExit(f"{args.minari}: the study needs a test-split export of a named or saved tournament")
        args.tournament = offline.settings["tournament_spec"]
    t = resolve_tournament(args.tournament)
    rows = t.split_rows("test")
    if offline is not None and (offline.settings["fingerprint"] != t.fingerprint or not np.array_equal(offline.rows, rows)
                                or (offline.settings["reward"], offline.settings["coefficients"]) != (REWARD.name, REWARD.coefficients)):
        raise SystemExit(f"{args.minari}: exported from another version of {args.tournament} or with another reward "
                         f"than the study's {REWARD.describe()}")
    out = args.out or RESULTS / (t.card.name if offline is None else f"{t.card.name}-minari")
    out.mkdir(parents=True, exist_ok=True)
    train = FitContext(t, REWARD).train_observations()
    featurizer = fit_featurizer(train, n_benchmarks=len(t.benchmarks), kind="tfidf-svd", dim=32, bias=True)
    features = featurizer.transform(ObservationBatch.from_tournament(t, rows)).astype(np.float64)
    values = {"reward": REWARD.matrix(t, rows), "accuracy": t.correct[rows], "energy_j": t.energy_j[rows]}
    policies = targets(t, rows)
    loggings = {
        "uniform": uniform_logging(len(rows), t.n_models),
        f"epsilon-greedy ({args.epsilon:g})": epsilon_greedy_logging(per_benchmark_best(t, rows), t.n_models, args.epsilon),
    }
    seeds, logged = range(args.seeds), None
    if offline is not None:  # the dataset's one log, under the seed it was drawn with
        seed = int(offline.settings["seed"])
        seeds, logged = [seed], {seed: offline.log}
        loggings = {f"{offline.settings['policy']} (Minari {args.minari})": offline.probabilities}
    frames = []
    for name, probs in loggings.items():
        tic = time.perf_counter()
        trials = ope_trials(values, features, policies, probs, seeds=seeds, regressor=args.regressor, logged=logged)
        frames.append(trials.assign(logging=name))
        print(f"{name}: {len(seeds)} logs in {time.perf_counter() - tic:.1f}s")
    trials = pd.concat(frames, ignore_index=True)
    summary = pd.concat([summarize_trials(f).assign(logging=f["logging"].iloc[0]) for f in frames], ignore_index=True)
    summary = summary[["logging", *[c for c in summary.columns if c != "logging"]]]
    trials.to_csv(out / "trials.csv", index=False)
    summary.to_csv(out / "summary.csv", index=False)
    header = (
        f"# Off-policy evaluation on {t.card.name} ({t.card.provenance})\n\n"
        f"{len(rows)} held-out queries x {t.n_models} models; "
        + (f"{len(seeds)} simulated logs per logging policy" if offline is None else f"the one log of Minari dataset {args.minari}")
        + f" (one revealed outcome per query); DM/DR regressor: {args.regressor} on TF-IDF+SVD (32) + benchmark features (DR 2-fold "
        f"cross-fitted). True values are exact from the full table. Bias interval: mean error +- 1.96 sd / sqrt(seeds). "
        f"Coverage: share of logs whose estimate +- 1.96 se contains the true value (DM has no se). "
        f"Run time {time.perf_counter() - start:.0f} s."
    )
    (out / "table.md").write_text(markdown(summary, header))
    plot(trials, f"OPE error on {t.card.name} ({len(rows)} held-out queries, {args.seeds} logs each)", out / "ope.png")
    print(f"wrote {out}/trials.csv, summary.csv, table.md, ope.png in {time.perf_counter() - start:.0f} s")
    write_readme(out, f"Off-policy evaluation study on {t.card.name}", __doc__)
    if out.parent == RESULTS:
        write_index(RESULTS, "`experiments/ope_study.py` results", "Each folder's `table.md` is the study's table.")


if __name__ == "__main__":
    main()
