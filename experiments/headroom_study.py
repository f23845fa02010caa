"""Issue 33's committed results: why no router reads the question (``routing-gym headroom``).

Runs ``routing-gym headroom`` on llmrouter, mmlu-pro, zeroeval-math and specialist-pool (the runs
of ``PLAN``: which routers where, and two runs with the routers' text forced on), each as its own process so its wall time, CPU time and peak memory are its own (``os.wait4``), into
``experiments/results/headroom/<tournament>/`` (headroom.json, table.md, headroom.png, cost.json), then
writes ``README.md`` there (this command, the ladder and the AUCs of every tournament, the
pairwise AUCs against 0.5, and the answer to "does a router read the question?")
from what the runs wrote. ``--summary-only`` rewrites the README from the folders already there.

The content routers are those of ``headroom.DEFAULT_ROUTERS`` that are registered. gbdt reads
e5 embeddings by default; where a tournament's prompts are not all in the shared e5 store yet
(``E5Store().cached``), it runs on TF-IDF + SVD here and the README says so (a second embedding
of the same texts would compete with the one filling the store).

    ROUTING_GYM_DATA_DIR=../shared/data OMP_NUM_THREADS=1 python experiments/headroom_study.py
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "headroom"
# An imported tournament: mmlu-pro's outcomes as a user's long table whose task label is the
# source dataset of each question (4 labels) instead of its subject (14), read in by `data import`.
IMPORTED = "mmlu-pro-by-source"
TOURNAMENTS = ("llmrouter", "mmlu-pro", "zeroeval-math", "specialist-pool", IMPORTED)
REAL = ("llmrouter", "mmlu-pro", "zeroeval-math")
PAIRWISE_REAL_MAX, PAIRWISE_CONTROL_MIN = 0.6, 0.85
CPU_LIMIT_S = 300.0
# The runs behind the committed folder: (tournament, routers or None for every default one, text forced).
# gbdt only on llmrouter: on the shared, loaded machine its fits took 1,020 s wall there (most of the
# run), so the larger pools leave it out; cost-aware and irt again with their text forced on where the
# label-nested routers fell back to the label (their AUCs are then 0.5 by construction).
PLAN = (("llmrouter", None, False), ("mmlu-pro", ("cost-aware", "irt", "mf"), False),
        ("zeroeval-math", ("cost-aware", "irt", "mf"), False), ("specialist-pool", ("cost-aware", "irt", "mf"), False),
        ("llmrouter", ("cost-aware", "irt"), True), ("mmlu-pro", ("cost-aware", "irt"), True),
        (IMPORTED, ("cost-aware", "irt", "mf"), False))
FORCED_STRENGTH = 0.01  # a middle L2 penalty of cost-aware's and irt's candidates: the text on, never the label alone
COMMAND = "ROUTING_GYM_DATA_DIR=../shared/data OMP_NUM_THREADS=1 python experiments/headroom_study.py"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def gbdt_kwargs(name: str) -> dict[str, Any]:
    """gbdt on e5 where every prompt is already in the shared store, else on TF-IDF + SVD."""
    from routing_gym.features import E5Store
    from routing_gym.sources import resolve_tournament

    prompts = list(resolve_tournament(name).prompts)
    return {} if E5Store().cached(prompts) == len(prompts) else {"gbdt": {"features": "tfidf-svd"}}


def imported_tournament() -> Path:
    """``IMPORTED``'s directory, built once by the user's path: ``data export mmlu-pro`` to a long
    table, its ``benchmark`` column replaced by the question's source dataset (the MMLU-Pro item's
    ``src`` up to its first "-": ori_mmlu, stemez, theoremQA, scibench), ``data import`` with the
    exported joules (derived from ML.ENERGY joules per token, and labelled so). The split is mmlu-pro's."""
    from routing_gym.paths import cache_dir
    from routing_gym.sources import resolve_tournament

    out = cache_dir() / "tournaments" / IMPORTED
    if (out / "card.json").exists() or any(out.glob("card.*")):
        return out
    source = resolve_tournament("mmlu-pro")
    origin = {q: str(m.get("src", "unknown")).split("-")[0]
              for q, m in zip(source.queries["query_id"], source.queries["metadata"])}
    table = out.parent / f"{IMPORTED}.csv"
    subprocess.run([sys.executable, "-m", "routing_gym", "data", "export", "mmlu-pro", "--out", str(table)], check=True,
                   cwd=ROOT, stdout=subprocess.DEVNULL)
    import pandas as pd

    long = pd.read_csv(table)
    long["benchmark"] = long["query_id"].map(origin)
    long.to_csv(table, index=False)
    subprocess.run([sys.executable, "-m", "routing_gym", "data", "import", str(table), "--out", str(out),
                    "--energy-provenance", "derived", "--name", IMPORTED, "--licence", "Apache-2.0 (MMLU-Pro outputs)"],
                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    table.unlink()
    log(f"imported {IMPORTED} into {out}")
    return out


def run_one(name: str, bootstrap: int, only: list[str] | None, text_forced: bool = False) -> dict[str, Any]:
    """One ``routing-gym headroom`` process; its wall time, CPU time (user + system) and peak memory.
    ``text_forced``: the routers' text strength fixed at ``FORCED_STRENGTH`` (no fallback to the
    label), into ``<name>-text-forced/``: what the text itself says, for the AUCs."""
    from routing_gym.eval.headroom import DEFAULT_ROUTERS
    from routing_gym_agents.registry import list_agents

    target = str(imported_tournament()) if name == IMPORTED else name
    kwargs = gbdt_kwargs(target) if "gbdt" in list_agents() else {}
    routers = [r for r in DEFAULT_ROUTERS if r in list_agents() and (only is None or r in only)]
    kwargs = {r: v for r, v in kwargs.items() if r in routers}
    if text_forced:
        kwargs = {r: {**kwargs.get(r, {}), "strength": FORCED_STRENGTH} for r in routers}
    folder = f"{name}-text-forced" if text_forced else name
    args = ["routing-gym", "headroom", target, "--out", f"experiments/results/headroom/{folder}", "--bootstrap", str(bootstrap),
            "--routers", ",".join(routers), "--agent-kwargs", json.dumps(kwargs)]
    log(" ".join(args))
    tic = time.perf_counter()
    with open(OUT / f"{folder}.log", "w") as stdout:
        process = subprocess.Popen([sys.executable, "-m", "routing_gym", *args[1:]], cwd=ROOT, stdout=stdout,
                                   stderr=subprocess.STDOUT, env={**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"})
        _, status, usage = os.wait4(process.pid, 0)
    (OUT / f"{folder}.log").unlink()  # the run's table is in its folder; the log held machine paths
    cost = {"command": " ".join(args).replace(target, f"<cache>/tournaments/{IMPORTED}") if name == IMPORTED else " ".join(args), "exit_status": os.waitstatus_to_exitcode(status),
            "wall_s": time.perf_counter() - tic, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mb": usage.ru_maxrss / 1024, "routers": routers,
            "gbdt_features": kwargs.get("gbdt", {}).get("features", "e5") if "gbdt" in routers else None}
    log(f"{name}: exit {cost['exit_status']}, {cost['wall_s']:.0f} s wall, {cost['cpu_s']:.0f} s CPU")
    return cost


def _ci(value: float | None, interval: list[float] | None) -> str:
    if value is None or interval is None or not math.isfinite(value):
        return "—"
    return f"{value:+.1f} [{interval[0]:+.1f}, {interval[1]:+.1f}]"


def _ci2(value: float | None, interval: list[float] | None) -> str:
    """Two decimals: the whole-tournament intervals are a few tenths wide."""
    if value is None or interval is None or not math.isfinite(value):
        return "—"
    return f"{value:+.2f} [{interval[0]:+.2f}, {interval[1]:+.2f}]"


def _auc(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.3f}"


def _at(rung: dict[str, Any] | None) -> str:
    """A rung's content gain with its interval and the test joules it was read at."""
    if not rung:
        return "—"
    return f"{_ci(rung['content_gain_pp'], rung['ci'])} at {rung['mean_j']:,.0f} J"


def summary(costs: dict[str, dict[str, Any]]) -> str:
    """README.md from every tournament's headroom.json and the runs' costs."""
    results = {n: json.loads((OUT / n / "headroom.json").read_text()) for n in TOURNAMENTS if (OUT / n / "headroom.json").exists()}
    forced = {n: json.loads((OUT / f"{n}-text-forced" / "headroom.json").read_text()) for n in TOURNAMENTS
              if (OUT / f"{n}-text-forced" / "headroom.json").exists()}
    rungs = ("fixed_model_hull", "task_aware_hull", "content_router", "shared_difficulty", "oracle")
    lines = ["# Headroom: why no router reads the question", "",
             f"Written by `{COMMAND}` (the runs of its `PLAN`, each listed under Cost); each folder holds `headroom.json`, `table.md` and "
             "`headroom.png` from `routing-gym headroom <tournament>` (the exact command below; the plot's middle panel is "
             "the ladder over joules). Nothing here is typed by hand: every number comes from those files. "
             f"`{IMPORTED}` is imported (`imported_tournament`): mmlu-pro's outcomes exported as a long table whose task label "
             "is each question's source dataset (4 labels: ori_mmlu, stemez, theoremQA, scibench) instead of its subject "
             "(14), read back by `routing-gym data import`; its joules are derived (ML.ENERGY joules per token).", "",
             "## The ladder: content gain over the task-aware yardstick (pp, 95 % paired bootstrap CI) at each rung's test joules",
             "", "Each rung spends the budget on train (knobs chosen there); on test it lands where it lands, so each gain is "
             "read against the yardstick (chosen on train) at the rung's own test joules, shown beside it. The yardstick's "
             "slope there is in each table.md.", "",
             "| Tournament | Budget J (train) | " + " | ".join(rungs) + " | Best content router |",
             "|---|---:|" + "---:|" * len(rungs) + "---|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['budget_j']:,.1f} | " + " | ".join(_at(r["rungs"].get(g)) for g in rungs)
                     + f" | {r['best_router']} |")
    lines += ["", "Rungs: fixed-model hull (mixes of fixed models), task-aware hull (per-benchmark routes), the best content "
              "router (cross-fitted correctness predictors), the shared-difficulty ceiling (privileged, inclusive: each "
              "held-out question's share of models right, its own candidates included) and the oracle (privileged). Each "
              "routes by P - mu x J / J_ref with mu chosen on train to spend the budget; the budget is where knowing "
              "difficulty is worth most on train (see each table.md).", "",
              "## Steps at common joules", "",
              "Each step is the difference of two consecutive rungs' test accuracy, both read along their test curves at the "
              "budget (paired; — where the budget lies below a rung's cheapest test point). Every rung over a grid of joules: each table.md, "
              "\"The ladder at common joules\", and the middle panel of headroom.png.", "",
              "| Tournament | J | label over fixed models | content router over label | difficulty (inclusive) over content router |",
              "|---|---:|---:|---:|---:|"]
    for name, r in results.items():
        steps = {s["to"]: s for s in r["steps"]}
        cells = [_ci(steps[g]["content_gain_step_pp"], steps[g]["ci"]) if g in steps else "—"
                 for g in ("task_aware_hull", "content_router", "shared_difficulty")]
        lines.append(f"| {name} | {r['budget_j']:,.1f} | " + " | ".join(cells) + " |")
    lines += ["", "## The difficulty ceiling: leak-free beside inclusive", "",
              "Leak-free: route among a random half of the pool and read each question's difficulty from the other half "
              "(never routed), 5 halvings. Inclusive: the same half-pools reading their own outcomes (an upper bound: it "
              "partly knows who was right). Each ceiling is the rung's step over the label rung at the half-pool's budget "
              "(both read along their test curves there), pp with 95 % CI. The map's form is chosen on train by "
              "cross-fitted log loss; the last column is the full-pool inclusive ceiling under every form.", "",
              "| Tournament | Leak-free step pp [CI] | Leak-free pairwise AUC | Inclusive step pp [CI] | Inclusive pairwise AUC | "
              "Form (chosen on train) | Full-pool inclusive ceiling over forms |", "|---|---:|---:|---:|---:|---|---:|"]
    for name, r in results.items():
        free, forms = r.get("leak_free"), r.get("forms")
        if not free:
            continue
        lf, inc = free["leak_free"], free["inclusive"]
        span = f"{forms['range_pp'][0]:+.1f} to {forms['range_pp'][1]:+.1f}" if forms else "—"
        lines.append(f"| {name} | {_ci(lf['step_over_label_pp'], lf['ci'])} | {_auc(lf['pairwise_auc'])} | "
                     f"{_ci(inc['step_over_label_pp'], inc['ci'])} | {_auc(inc['pairwise_auc'])} | "
                     f"{forms['chosen'] if forms else '—'} | {span} |")
    lines += ["", "## The content router over the whole tournament", "",
              "The best router cross-fitted in 5 folds over the training and held-out splits together (every question "
              "scored by a fit that never saw it), beside the label rung cross-fitted the same way; the step is what reading "
              "the text adds. Skipped where its predicted fitting time is over the run's budget (`--whole-budget-s`).", "",
              "| Tournament | Router | Held-out split: content gain | Whole: content gain | Whole: label rung | "
              "Whole: step over the label [CI] | CI width, split -> whole |", "|---|---|---:|---:|---:|---:|---|"]
    for name, r in {**results, **{f"{n}-text-forced": f for n, f in forced.items()}}.items():
        whole, split = r.get("whole_tournament"), r["rungs"].get("content_router")
        if not whole or not split:
            continue
        if "skipped" in whole:
            lines.append(f"| {name} | {whole['router']} | {_ci(split['content_gain_pp'], split['ci'])} | "
                         f"not run: {whole['skipped']} | | | |")
            continue
        widths = f"{split['ci'][1] - split['ci'][0]:.2f} -> {whole['ci'][1] - whole['ci'][0]:.2f}"
        lines.append(f"| {name} | {whole['router']} | {_ci2(split['content_gain_pp'], split['ci'])} | "
                     f"{_ci2(whole['content_gain_pp'], whole['ci'])} | "
                     f"{_ci2(whole['task_aware_hull']['content_gain_pp'], whole['task_aware_hull']['ci'])} | "
                     f"{_ci2(whole['step_over_label_pp'], whole['step_ci'])} | {widths} |")
    lines += ["", "## Routability: does the text say which model wins?", "",
              "| Tournament | Router | Within-benchmark AUC | Pairwise AUC | Shared difficulty (inclusive): within / pairwise | "
              "Oracle's lead from questions 1-2 models answer | Guessing rate | Copies disagreeing |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, r in results.items():
        for router, info in r["routers"].items():
            if info.get("error"):
                lines.append(f"| {name} | {router} | failed: `{info['error'][:80]}` | | | | | |")
                continue
            shared = r["routability"]["shared_difficulty"]
            guess, copies = r["noise_floor"]["guessing"]["guessing_rate"], r["noise_floor"]["copies"]["disagreement_rate"]
            lines.append(f"| {name} | {router}{' (best)' if router == r['best_router'] else ''} | "
                         f"{_auc(info['within_benchmark_auc'])} | {_auc(info['pairwise_auc'])} | "
                         f"{_auc(shared['within_benchmark_auc'])} / {_auc(shared['pairwise_auc'])} | "
                         f"{100 * r['oracle_lead']['rare_share']:.0f} % | {'—' if guess is None else f'{guess:.3f}'} | "
                         f"{'—' if copies is None else f'{100 * copies:.1f} %'} |")
    for name, r in forced.items():
        for router, info in r["routers"].items():
            if not info.get("error"):
                lines.append(f"| {name} | {router} (text forced, strength {FORCED_STRENGTH:g}) | "
                             f"{_auc(info['within_benchmark_auc'])} | {_auc(info['pairwise_auc'])} | | | | |")
    generators = {n: r["generator"]["specialization_signal"] for n, r in results.items() if r.get("generator")}
    lines += ["", *[f"{n} is procedural: the generator's specialization_signal is {s:g} (topics named in the text decide "
                    "which model is right)." for n, s in generators.items()], ""]
    # No check here compares a test-split number with a target: the pairwise AUCs below are the
    # statistic the question asks about (0.5: a scorer that knows difficulty or the label only).
    lines += ["## Pairwise AUCs against 0.5 (difficulty or label only) and the procedural control", "",
              f"(`{IMPORTED}` is left out: its label is coarser than the subject the text names, so a router may read "
              "the subject; its AUCs are in the routability table.)", ""]
    for name, r in results.items():
        if name == IMPORTED:
            continue
        limit = PAIRWISE_REAL_MAX if name in REAL else PAIRWISE_CONTROL_MIN
        for label, router in (("best router", r["best_router"]), ("most text-reading router", text_reader(r))):
            value = r["routers"][router]["pairwise_auc"]
            ok = (value <= limit) if name in REAL else (value >= limit)
            lines.append(f"- {name}: pairwise AUC of the {label} ({router}) {_auc(value)} "
                         f"({'<=' if name in REAL else '>='} {limit}: {'yes' if ok else 'NO'})")
    for name, r in forced.items():
        limit = PAIRWISE_REAL_MAX if name in REAL else PAIRWISE_CONTROL_MIN
        for router, info in r["routers"].items():
            if not info.get("error"):
                ok = (info["pairwise_auc"] <= limit) if name in REAL else (info["pairwise_auc"] >= limit)
                lines.append(f"- {name}: pairwise AUC of {router} with the text forced on {_auc(info['pairwise_auc'])} "
                             f"({'<=' if name in REAL else '>='} {limit}: {'yes' if ok else 'NO'})")
    lines += ["", "## Cost (each run its own process; one thread)", "",
              "| Tournament | Exit | Wall s | CPU s | Peak MB | gbdt features | Command |", "|---|---:|---:|---:|---:|---|---|"]
    for name, c in costs.items():
        gbdt = c["gbdt_features"] if "gbdt" in c["command"].split("--routers ")[1].split()[0].split(",") else "not run"
        lines.append(f"| {name} | {c['exit_status']} | {c['wall_s']:.0f} | {c['cpu_s']:.0f} | {c['peak_rss_mb']:.0f} | "
                     f"{gbdt} | `{c['command']}` |")
    lines += ["", f"The target: <= {CPU_LIMIT_S:.0f} s per real tournament on one core (CPU time; wall time "
              "depends on the machine's load: these runs shared two cores with other jobs). gbdt ran on TF-IDF + SVD "
              "where e5 embeddings were not cached yet, and was left out where noted (its wall time on the loaded machine).",
              "", "## Does a router read the question?", ""]
    lines += answer(results, forced)
    return "\n".join(lines) + "\n"


def text_reader(r: dict[str, Any]) -> str | None:
    """The router whose test P orders questions best within benchmarks: the most of the text any
    router reads (a label-nested router that fell back to the label scores exactly 0.5)."""
    ok = {n: i for n, i in r["routers"].items() if not i.get("error")}
    return max(ok, key=lambda n: ok[n]["within_benchmark_auc"], default=None)


def router_claim(r: dict[str, Any]) -> tuple[bool, str]:
    """Whether the best router reads the question beyond its label, and the evidence: its step over
    the label rung over the whole tournament where that ran (the narrower interval), else its
    content gain on the held-out split."""
    whole, split = r.get("whole_tournament") or {}, r["rungs"].get("content_router")
    if "step_ci" in whole:
        return whole["step_ci"][0] > 0, (f"step over the label rung {_ci2(whole['step_over_label_pp'], whole['step_ci'])} pp "
                                         f"over all {whole['n_queries']:,} questions, {whole['folds']}-fold cross-fitted")
    if split is None:
        return False, "no router ran"
    return split["ci"][0] > 0, f"content gain {_ci(split['content_gain_pp'], split['ci'])} pp on the held-out split"


def answer(results: dict[str, dict[str, Any]], forced: dict[str, dict[str, Any]]) -> list[str]:
    """The answer in words, each claim computed from the runs."""
    out = []
    for name, r in results.items():
        g = {k: r["rungs"][k] for k in ("shared_difficulty", "oracle")}
        reads, evidence = router_claim(r)
        free = r.get("leak_free")
        difficulty = (f"Knowing each question's difficulty from models that are not routed would add "
                      f"{_ci(free['leak_free']['step_over_label_pp'], free['leak_free']['ci'])} pp (half-pools; reading the "
                      f"candidates' own outcomes instead, which leaks who was right: "
                      f"{_ci(free['inclusive']['step_over_label_pp'], free['inclusive']['ci'])})"
                      if free else
                      f"Knowing each question's difficulty (inclusive) would add "
                      f"{_ci(g['shared_difficulty']['content_gain_pp'], g['shared_difficulty']['ci'])} pp")
        out.append(f"- **{name}**: the best router ({r['best_router']}) "
                   f"{'reads the question beyond its benchmark label' if reads else 'does not beat the benchmark label'} "
                   f"({evidence}); {reader_note(r)}. {difficulty}; the oracle sits "
                   f"{_ci(g['oracle']['content_gain_pp'], g['oracle']['ci'])} pp above the label, "
                   f"{100 * r['oracle_lead']['rare_share']:.0f} % of it from questions only one or two models answer."
                   + forced_note(forced.get(name)))
    return out + ["", "Each claim above is one interval per tournament (marginal 95 %, the whole-tournament step where it "
                  "ran); the claims within one ladder are decided family-wise in its table.md (Romano-Wolf step-down over "
                  "every rung's gain and every step).", "", "Where the pairwise AUC is near 0.5, the text predicts how hard a question is (a difficulty every "
                  "model shares) but not which model wins it: the oracle's lead is out of reach of routers that read the "
                  "text as these do, and the leak-free ceiling estimates what knowing difficulty exactly would add.", ""]


def forced_note(r: dict[str, Any] | None) -> str:
    """What the routers say with their text strength fixed (``--text-forced``), where that was run."""
    if r is None:
        return ""
    parts = [f"{n} within-benchmark AUC {_auc(i['within_benchmark_auc'])}, pairwise {_auc(i['pairwise_auc'])}, content "
             f"gain {_ci(i['rung']['content_gain_pp'], i['rung']['ci'])} pp" for n, i in r["routers"].items() if not i.get("error")]
    reads, evidence = router_claim(r)
    return (f" With the text forced on (strength {FORCED_STRENGTH:g}, `{r['tournament']['name']}-text-forced/`): "
            + "; ".join(parts) + f"; the best of them {'reads the question beyond' if reads else 'does not beat'} the label "
            f"({evidence}).")


def reader_note(r: dict[str, Any]) -> str:
    """The best router's pairwise AUC, and the most text-reading router's where they differ."""
    best, reader = r["best_router"], text_reader(r)
    note = f"its pairwise AUC is {_auc(r['pairwise_auc'])}"
    if r["routers"][best]["within_benchmark_auc"] == 0.5:
        note += " (it fell back to the label on its validation part: 0.5 by construction)"
    if r["routers"][reader]["within_benchmark_auc"] == 0.5:
        return note + "; so did every other router"
    elif reader != best:
        info = r["routers"][reader]
        note += (f"; the router that reads most of the text, {reader} (within-benchmark AUC "
                 f"{_auc(info['within_benchmark_auc'])}), ranks the right model of a disagreeing pair with AUC "
                 f"{_auc(info['pairwise_auc'])}")
    return note + " (0.5: the text does not say which model wins)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tournaments", default=None,
                        help="run only these (comma-separated) with --routers / --text-forced; default: the whole PLAN")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--routers", default=None, help="comma-separated subset of the default content routers")
    parser.add_argument("--text-forced", action="store_true",
                        help=f"fix the routers' text strength at {FORCED_STRENGTH} (folder <tournament>-text-forced)")
    parser.add_argument("--summary-only", action="store_true", help="rewrite README.md from the folders already there")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.tournaments is None:
        runs = list(PLAN)
    else:
        routers = None if args.routers is None else tuple(args.routers.split(","))
        runs = [(n.strip(), routers, args.text_forced) for n in args.tournaments.split(",") if n.strip()]
    if not args.summary_only:  # one cost file per run folder, so several invocations may run side by side
        for name, routers, text_forced in runs:
            cost = run_one(name, args.bootstrap, None if routers is None else list(routers), text_forced)
            (OUT / (f"{name}-text-forced" if text_forced else name) / "cost.json").write_text(json.dumps(cost, indent=1))
    folders = [f for n in TOURNAMENTS for f in (n, f"{n}-text-forced")]
    costs = {f: json.loads((OUT / f / "cost.json").read_text()) for f in folders if (OUT / f / "cost.json").exists()}
    (OUT / "README.md").write_text(summary(costs))
    log(f"wrote {OUT / 'README.md'}")
    return max((c["exit_status"] for c in costs.values()), default=0)


if __name__ == "__main__":
    sys.exit(main())
