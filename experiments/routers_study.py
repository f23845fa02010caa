"""Issue 32's committed results: do the learned routers at least match the label they are given?

Parts (``--parts``, all by default), written under ``experiments/results/routers/``:

- ``compare``: ``routing-gym compare`` with the default agent set (cost-aware, irt, mf, gbdt
  among them) on mmlu-pro, llmrouter, zeroeval-math and specialist-pool, each run as its own
  process so its wall time, CPU time and peak memory are its own (``os.wait4``); outputs in
  ``<tournament>/`` (the saved cells stay under ``.cache/routers/``, ignored by git);
- ``bandits``: linucb, epsilon-greedy and thompson on mmlu-pro at several passes over the
  training split (``epochs``; audit off, one seed): content gain against passes;
- ``uniroute``: why uniroute's routes equal per-benchmark's on mmlu-pro (its clusters against the
  subjects, and what each cluster routes to), routellm's arms, and what the label-nested routers
  chose on their validation part there;
- ``summary``: ``README.md`` (this command, every table) from what the parts wrote.

gbdt runs on e5 embeddings here where a tournament's prompts are all in the shared e5 store
(``E5Store().cached``), else on its default TF-IDF + SVD, and the README says which (a second
embedding of the same texts would compete with the one filling the store).

    ROUTING_GYM_DATA_DIR=../shared/data OMP_NUM_THREADS=1 python experiments/routers_study.py --seeds 1
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from task_aware_study import _ci, check_choices  # this script's folder is on sys.path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "routers"
CELLS = ROOT / ".cache" / "routers"
TOURNAMENTS = ("mmlu-pro", "llmrouter", "zeroeval-math", "specialist-pool")
NESTED = ("cost-aware", "irt", "mf", "gbdt")
BANDITS = ("linucb", "epsilon-greedy", "thompson")
PASSES = (1, 2, 4)
PARTS = ("compare", "bandits", "uniroute", "summary")
BASELINES = ("fixed-smallest", "fixed-medium", "fixed-largest", "per-benchmark", "random")  # not routers that read the text


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def gbdt_features(name: str) -> str:
    """e5 where every prompt of the tournament is already in the shared store, else tfidf-svd."""
    from routing_gym.features import E5Store
    from routing_gym.sources import resolve_tournament

    prompts = list(resolve_tournament(name).prompts)
    return "e5" if E5Store().cached(prompts) == len(prompts) else "tfidf-svd"


def compare_process(args: list[str], cells: Path, out: Path) -> dict[str, Any]:
    """``routing-gym <args> --out cells`` as a process of its own, its output files copied into
    ``out``: its exit status, wall time, CPU time and peak memory (``os.wait4``)."""
    tic = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "routing_gym", *args, "--out", str(cells)], cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - tic
    out.mkdir(parents=True, exist_ok=True)
    for path in cells.iterdir():
        if path.is_file():
            shutil.copy2(path, out / path.name)
    return {"exit_status": os.waitstatus_to_exitcode(status), "wall_s": round(wall, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


def run_compare(name: str, seeds: int) -> None:
    """One ``routing-gym compare`` process; its outputs and resource use into ``OUT/<name>``."""
    features = gbdt_features(name)
    cells = CELLS / name
    args = ["compare", "--tournament", name, "--seeds", str(seeds)]
    if features == "e5":
        args += ["--agent-kwargs", json.dumps({"gbdt": {"features": features}})]
    usage = compare_process(args, cells, OUT / name)
    command = " ".join(["routing-gym", "compare", "--tournament", name, "--seeds", str(seeds)]
                       + ([f"--agent-kwargs '{args[-1]}'"] if features == "e5" else []))
    (OUT / name / "run.json").write_text(json.dumps({
        "command": command, **usage, "gbdt_features": features, "cells_reused_from": str(cells.relative_to(ROOT)),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }, indent=1))
    log(f"compare {name}: {usage['wall_s']:.0f} s wall, {usage['cpu_s']:.0f} s CPU, {usage['peak_rss_mb']:.0f} MB")


def run_bandits() -> None:
    """Content gain of the bandits at each number of passes over mmlu-pro's training split."""
    from routing_gym.eval.compare import CompareConfig, run_compare as compare

    rows = []
    for passes in PASSES:
        config = CompareConfig(tournament="mmlu-pro", agents=list(BANDITS), seeds=1, audit=False, progress=False,
                               agent_kwargs={name: {"epochs": passes} for name in BANDITS})
        result = compare(config, out_dir=CELLS / f"bandits-{passes}")
        for name in BANDITS:
            row = result.row(name)
            rows.append({"agent": name, "passes": passes, **{k: row.get(k) for k in (
                "accuracy", "mean_energy_j", "content_gain_pp", "content_gain_pp_ci_low", "content_gain_pp_ci_high",
                "routing_gain_pp", "routing_gain_pp_ci_low", "routing_gain_pp_ci_high", "fit_s")}})
        log(f"bandits x {passes} passes done")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bandits_passes.json").write_text(json.dumps(rows, indent=1))


def run_uniroute() -> None:
    """uniroute's clusters against mmlu-pro's subjects, and its routes against per-benchmark's."""
    import pandas as pd

    from routing_gym.envs import ObservationBatch, Reward
    from routing_gym.sources import resolve_tournament
    from routing_gym_agents import FitContext, make_agent

    t = resolve_tournament("mmlu-pro")
    fitted = {}
    gbdt = {"features": gbdt_features("mmlu-pro")}
    for name in ("uniroute", "per-benchmark", "routellm", *NESTED):
        agent = make_agent(name, **(gbdt if name == "gbdt" else {}))
        logs = agent.fit(FitContext(t, Reward("gated_rank", {"lambda_e": 0.4}), seed=0))
        fitted[name] = (agent, logs)
    uni = fitted["uniroute"][0]
    test = ObservationBatch.from_tournament(t, t.split_rows("test"))
    train = ObservationBatch.from_tournament(t, t.split_rows("train"))
    ids = np.array(t.model_ids)
    routes = {name: ids[fitted[name][0].act_batch(test)] for name in ("uniroute", "per-benchmark")}
    clusters = uni.kmeans.predict(uni.batch_features(train))
    table = pd.crosstab(pd.Series(np.array(t.benchmarks)[train.benchmarks], name="subject"), pd.Series(clusters, name="cluster"))
    score = uni.cluster_error + uni.cost_weight * uni.costs
    payload = {
        "same_route_share": float((routes["uniroute"] == routes["per-benchmark"]).mean()),
        "routes": {name: pd.Series(r).value_counts().to_dict() for name, r in routes.items()},
        "cluster_route": [str(ids[m]) for m in score.argmin(axis=1)],
        "cluster_sizes": np.bincount(clusters, minlength=uni.kmeans.n_clusters).tolist(),
        "subjects_by_cluster": table.to_dict(),
        "routellm_arms": {k: fitted["routellm"][1][k] for k in ("strong", "weak")},
        # What the label-nested routers chose on their validation part (seed 0): the text's strength and
        # the validation value (mean correct - mu x J / J_ref of the routes) of every candidate.
        "nested_choice": {name: {k: fitted[name][1][k] for k in ("strength", "validation_value")} for name in NESTED},
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "uniroute.json").write_text(json.dumps(payload, indent=1, default=int))


def _split_subjects(by_cluster: dict[str, dict[str, int]]) -> list[str]:
    """Subjects whose training rows fall in more than one cluster (``crosstab.to_dict()``: cluster -> subject -> rows)."""
    subjects = {subject for column in by_cluster.values() for subject in column}
    return sorted(s for s in subjects if sum(column.get(s, 0) > 0 for column in by_cluster.values()) > 1)


def summarise() -> None:
    lines = ["# Routers at the literature's strength", "",
             "Written by `experiments/routers_study.py` (every part: `python experiments/routers_study.py --seeds N`; this "
             "page alone: `--parts summary`); each section names its own command and files. Content gain: accuracy minus the "
             "task-aware hull (per-benchmark routes chosen on train, the fixed models, their mixes) at the method's mean "
             "joules, pp [paired 95 % bootstrap interval over test queries]. Machine: 2 shared cores under heavy load, so "
             "wall times are load-bound; CPU time is reported beside them.", ""]
    for name in TOURNAMENTS:
        folder = OUT / name
        if not (folder / "results.json").exists():
            continue
        results = json.loads((folder / "results.json").read_text())
        run = json.loads((folder / "run.json").read_text())
        lines += [f"## {name} (`{name}/`, {len(results['settings']['seeds'])} seed(s))", "",
                  f"`{run['command']}` — {run['wall_s']:.0f} s wall, {run['cpu_s']:.0f} s CPU, peak {run['peak_rss_mb']:.0f} MB "
                  f"(exit status {run['exit_status']}); gbdt features: {run['gbdt_features']}.", "",
                  "| Method | Deployable | Accuracy % | Mean J | Routing gain pp | Content gain pp |", "|---|---|---:|---:|---:|---:|"]
        for r in results["rows"]:
            if r["kind"] == "fixed-model" or not r.get("seeds_ok"):
                continue
            lines.append(f"| {r['method']} | {r.get('deployable_label', 'yes' if r['deployable'] else 'no')} | "
                         f"{100 * r['accuracy']:.1f} | {r['mean_energy_j']:,.1f} | "
                         f"{_ci(r, 'routing_gain_pp')} | {_ci(r, 'content_gain_pp')} |")
        deployable = [r for r in results["rows"] if r["kind"] == "agent" and r["deployable"] and r.get("seeds_ok")
                      and r.get("content_gain_pp") is not None and r["method"] not in BASELINES]
        if deployable:
            best = max(deployable, key=lambda r: r["content_gain_pp"])
            low = max(deployable, key=lambda r: r["content_gain_pp_ci_low"])
            above = [r["method"] for r in deployable if r["content_gain_pp_ci_low"] > 0]
            lines += ["", f"Best deployable router's content gain: {best['method']} {_ci(best, 'content_gain_pp')}; "
                      f"highest lower bound: {low['method']} ({low['content_gain_pp_ci_low']:+.1f}); content gain CI above 0: "
                      f"{', '.join(above) or 'none'}."]
        lines.append("")
    if (OUT / "bandits_passes.json").exists():
        rows = json.loads((OUT / "bandits_passes.json").read_text())
        lines += ["## Bandits: passes over mmlu-pro's training split (`bandits_passes.json`, one seed, audit off)", "",
                  "| Agent | Passes | Accuracy % | Mean J | Content gain pp | Fit s |", "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {r['agent']} | {r['passes']} | {100 * r['accuracy']:.1f} | {r['mean_energy_j']:,.1f} | "
                  f"{_ci(r, 'content_gain_pp')} | {r['fit_s']:.0f} |"
                  for r in rows]
        lines += ["", "The bandits' default stays one pass (`epochs=1`): every training decision is then an online "
                  "decision on a question not seen before, so the regret logged over training means what it says; more "
                  "passes replay the same questions (compare the rows above for what they buy).", ""]
    if (OUT / "uniroute.json").exists():
        u = json.loads((OUT / "uniroute.json").read_text())
        split = _split_subjects(u["subjects_by_cluster"])
        lines += ["## uniroute against per-benchmark on mmlu-pro (`uniroute.json`)", "",
                  f"Share of test queries routed to the same model: {u['same_route_share']:.3f}. uniroute's routes: "
                  f"{u['routes']['uniroute']}; per-benchmark's: {u['routes']['per-benchmark']}. Each cluster's route "
                  f"(cluster error + cost_weight x cost): {u['cluster_route']}; cluster sizes {u['cluster_sizes']}.",
                  "", f"Subjects split across clusters (training rows of one subject in more than one cluster): "
                  f"{', '.join(split) or 'none'}" + ("; k-means on the featurizer's text block plus its benchmark one-hot "
                  "groups whole subjects, so uniroute is a coarser per-benchmark router here." if not split else "."),
                  "", f"routellm's arms on mmlu-pro: strong {u['routellm_arms']['strong']}, weak {u['routellm_arms']['weak']}.", "",
                  "What the label-nested routers chose on mmlu-pro's validation part (seed 0; value = mean correct - mu x "
                  "J / J_ref of the routes there, label only = 'inf'):", ""]
        for name, choice in u["nested_choice"].items():
            best = max(choice["validation_value"].values())
            lines.append(f"- {name}: strength {choice['strength']}; label only {choice['validation_value']['inf']:.4f}, "
                         f"best candidate {best:.4f}")
        label_only = [n for n, c in u["nested_choice"].items() if c["strength"] == "label only"]
        lines += ["", f"Routers whose text residual did not beat the label on validation (so they route exactly as "
                  f"per-benchmark at their price): {', '.join(label_only) or 'none'}.", ""]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "README.md").write_text("\n".join(lines))
    print("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS))
    parser.add_argument("--tournaments", default=",".join(TOURNAMENTS), help="comma-separated: " + ", ".join(TOURNAMENTS))
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    parts, names = check_choices(parser, args, PARTS, TOURNAMENTS)
    if "compare" in parts:
        for name in names:
            run_compare(name, args.seeds)
    if "bandits" in parts:
        run_bandits()
    if "uniroute" in parts:
        run_uniroute()
    if "summary" in parts:
        summarise()
    return 0


if __name__ == "__main__":
    sys.exit(main())
