"""Issues 33 and 60's committed results: why no router reads the question (``routing-gym headroom``).

Runs ``routing-gym headroom`` on llmrouter, mmlu-pro, zeroeval-math and specialist-pool (the runs
of ``PLAN``: which routers where, and two runs with the routers' text forced on), each as its own process so its wall time, CPU time and peak memory are its own (``os.wait4``), into
``experiments/results/headroom/<tournament>/`` (headroom.json, table.md, headroom.png, cost.json), then
writes ``README.md`` there (this command, the ladder and the AUCs of every tournament, the
pairwise AUCs against 0.5, and the answer to "does a router read the question?")
from what the runs wrote. ``--summary-only`` rewrites the README from the folders already there.
"Before" columns read the same files as committed at ``BEFORE_COMMIT`` (``git show``), before
issue 60 (a leak-free map whose curves could cross, a whole-tournament step with the router
chosen outside the folds). The simulation with known truth (``simulation.planted_pool``) is run
here too, into ``simulation.json``.

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
BEFORE_COMMIT = "14a68bd"  # the committed results before issue 60
AUC_LEAK_FREE_MAX = 0.55  # issue 60: a difficulty map that cannot say who wins
SIMULATION = ((0.0, "independent outcomes across models (truth 0)"), (3.0, "planted shared difficulty (truth known)"))
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


def before(folder: str) -> dict[str, Any] | None:
    """A folder's headroom.json as committed at ``BEFORE_COMMIT`` (None where it was not there)."""
    done = subprocess.run(["git", "show", f"{BEFORE_COMMIT}:experiments/results/headroom/{folder}/headroom.json"], cwd=ROOT,
                          capture_output=True, text=True)
    return json.loads(done.stdout) if done.returncode == 0 else None


def simulation(partitions: int = 5, bootstrap: int = 1000) -> dict[str, Any]:
    """The leak-free, inclusive and crossing ceilings beside the known truth on ``planted_pool``s."""
    from routing_gym.eval.headroom import HeadroomConfig, leak_free_ceiling
    from routing_gym.eval.headroom.simulation import planted_pool

    out = {}
    for shared, label in SIMULATION:
        t, known = planted_pool(4000, 8, shared, seed=1)
        lf = leak_free_ceiling(HeadroomConfig(tournament=t, n_bootstrap=bootstrap), t, partitions, known=known)
        out[label] = {"shared": shared, **{k: lf[k] for k in ("known", "leak_free", "inclusive", "crossing")}}
    return out


def current(r: dict[str, Any]) -> bool:
    """Whether a headroom.json was written by this version (nested whole-tournament step)."""
    whole = r.get("whole_tournament") or {}
    return "seeds" in whole or ("skipped" in whole and "routers" in whole)


def summary(costs: dict[str, dict[str, Any]]) -> str:
    """README.md from every tournament's headroom.json and the runs' costs."""
    from routing_gym.eval.headroom.whole import familywise_over

    results = {n: json.loads((OUT / n / "headroom.json").read_text()) for n in TOURNAMENTS if (OUT / n / "headroom.json").exists()}
    stale = [n for n, r in results.items() if not current(r)]
    results = {n: r for n, r in results.items() if current(r)}
    forced = {n: json.loads((OUT / f"{n}-text-forced" / "headroom.json").read_text()) for n in TOURNAMENTS
              if (OUT / f"{n}-text-forced" / "headroom.json").exists()}
    stale += [f"{n}-text-forced" for n, r in forced.items() if not current(r)]
    forced = {n: r for n, r in forced.items() if current(r)}
    old = {n: before(n) for n in results}
    costs = {f: c for f, c in costs.items() if f in results or f.removesuffix("-text-forced") in forced}
    rungs = ("fixed_model_hull", "task_aware_hull", "content_router", "shared_difficulty", "oracle")
    lines = ["# Headroom: why no router reads the question", "",
             f"Written by `{COMMAND}` (the runs of its `PLAN`, each listed under Cost); each folder holds `headroom.json`, `table.md` and "
             "`headroom.png` from `routing-gym headroom <tournament>` (the exact command below; the plot's middle panel is "
             "the ladder over joules). Nothing here is typed by hand: every number comes from those files. "
             f"`{IMPORTED}` is imported (`imported_tournament`): mmlu-pro's outcomes exported as a long table whose task label "
             "is each question's source dataset (4 labels: ori_mmlu, stemez, theoremQA, scibench) instead of its subject "
             "(14), read back by `routing-gym data import`; its joules are derived (ML.ENERGY joules per token).", "",
             *([f"Not rerun with this version (their folders are as committed before, and left out of every table "
                f"here): {', '.join(stale)}.", ""] if stale else []),
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
    lines += ["", "## The difficulty ceiling: leak-free beside inclusive, before -> after", "",
              "Leak-free: route among a random half of the pool and read each question's difficulty from the other half "
              "(never routed), 5 halvings. Inclusive: the same half-pools reading their own outcomes (an upper bound: it "
              "partly knows who was right). After: the map has a shared shape (logit P(k right | q in b) = a_bk + g_b(d): "
              "difficulty never re-orders models) and both rungs are read on one grid of joules fixed on train (the step "
              "over the label rung averaged over 8 joule values). Before (commit " + BEFORE_COMMIT + "): each model its own "
              "curve (curves may cross) and both read at the budget the leak-free rung chose. Crossing: the after-run's "
              "leak-free share through the crossing map, a labelled upper variant. pp with 95 % CI.", "",
              "| Tournament | Leak-free before | Leak-free after | Leak-free pairwise AUC before -> after | Inclusive before | "
              "Inclusive after | Leak-free <= inclusive (after) | Crossing (upper variant) [AUC] |",
              "|---|---:|---:|---|---:|---:|---|---:|"]
    for name, r in results.items():
        free, prev = r.get("leak_free"), (old.get(name) or {}).get("leak_free")
        if not free:
            continue
        lf, inc, cross = free["leak_free"], free["inclusive"], free["crossing"]
        was = (lambda k, key: prev[k][key] if prev else None)  # noqa: E731
        auc_ok = lf["pairwise_auc"] <= AUC_LEAK_FREE_MAX
        order_ok = lf["step_over_label_pp"] <= inc["step_over_label_pp"]
        lines.append(f"| {name} | {_ci(was('leak_free', 'step_over_label_pp'), was('leak_free', 'ci'))} | "
                     f"{_ci(lf['step_over_label_pp'], lf['ci'])} | {_auc(was('leak_free', 'pairwise_auc'))} -> "
                     f"{_auc(lf['pairwise_auc'])} (<= {AUC_LEAK_FREE_MAX}: {'yes' if auc_ok else 'NO'}) | "
                     f"{_ci(was('inclusive', 'step_over_label_pp'), was('inclusive', 'ci'))} | "
                     f"{_ci(inc['step_over_label_pp'], inc['ci'])} | {'yes' if order_ok else 'NO'} | "
                     f"{_ci(cross['step_over_label_pp'], cross['ci'])} [{_auc(cross['pairwise_auc'])}] |")
    sim_path = OUT / "simulation.json"
    if sim_path.exists():
        sim = json.loads(sim_path.read_text())
        lines += ["", "## The ceilings on pools whose truth is known", "",
                  "`routing_gym.eval.headroom.simulation.planted_pool` (4,000 questions, 8 models, 2 benchmarks, seed 1): "
                  "outcomes drawn from logit P = a_bk + shared x d_q. The truth is the rung that routes by the exact P "
                  "given the reference half's outcomes (the generator's own map), read on the same halvings, grid and "
                  "resamples as the estimates; minus-truth intervals are paired. Written by this script into "
                  "`simulation.json`; `tests/test_headroom.py` asserts the same.", "",
                  "| Pool | Truth | Leak-free (after) | Leak-free minus truth | Inclusive | Inclusive minus truth | "
                  "Crossing | Crossing minus truth |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for label, v in sim.items():
            cells = [_ci(v["known"]["step_over_label_pp"], v["known"]["ci"])]
            for key in ("leak_free", "inclusive", "crossing"):
                cells += [_ci(v[key]["step_over_label_pp"], v[key]["ci"]), _ci(v[key]["minus_known_pp"], v[key]["minus_known_ci"])]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines += ["", "The leak-free ceiling lands on the truth (its paired difference's interval holds 0); the inclusive "
                  "one, which reads the routed models' own outcomes, lands above it: the leak the leak-free ceiling "
                  "removes. The crossing map has no who-wins structure to learn here (each model's outcome depends on "
                  "the question only through the shared difficulty), so it lands near the truth too; on real pools with "
                  "specialists it does not (its pairwise AUC in the table above)."]
    verdicts = familywise_over({n: r["whole_tournament"] for n, r in results.items()}, 0.95)
    lines += ["", "## The content router over the whole tournament, selection nested: before -> after", "",
              "After: 3 outer folds over the training and held-out splits together, repeated for 5 fold seeds; inside each "
              "outer fold, from the other folds only, every router of the pool is fitted (each choosing its strength on its "
              "own validation part) and the one with the highest validation value routes the fold; the label rung is the "
              "task-aware yardstick's chain rule cross-fitted the same way (so it sits on the yardstick, 0.00). The interval "
              "is the corrected repeated cross-validation t interval (Nadeau & Bengio 2003), which accounts for refitting; "
              "the first seed's bootstrap holding its fits fixed is shown beside it. Before: 5 folds, one seed, the router "
              "and strength chosen on the training split (outside the folds), a bootstrap holding the fits fixed. Verdict: "
              "Romano-Wolf step-down over the tournaments' steps (family-wise 5 %).", "",
              "| Tournament | Before: router, step [CI] | After: pool (folds won) | After: step over the label [CI] | "
              "Seeds: min / max (sd) | Fixed-fit bootstrap CI (seed 0) | Label rung after | Family-wise verdict |",
              "|---|---|---|---:|---|---|---:|---|"]
    for name, r in results.items():
        whole, prev = r.get("whole_tournament"), (old.get(name) or {}).get("whole_tournament") or {}
        was = (f"{prev['router']}, {_ci2(prev['step_over_label_pp'], prev['step_ci'])}" if "step_ci" in prev else "—")
        if not whole or "skipped" in whole:
            lines.append(f"| {name} | {was} | not run: {(whole or {}).get('skipped', 'no router')} | | | | | |")
            continue
        spread, fixed = whole["seed_spread"], whole["fixed_fit_ci"]["step_ci"]
        pool = ", ".join(f"{n} {c}" for n, c in whole["chosen"].items())
        lines.append(f"| {name} | {was} | {pool} | {_ci2(whole['step_over_label_pp'], whole['step_ci'])} | "
                     f"{spread['min']:+.2f} / {spread['max']:+.2f} ({spread['sd']:.2f}) | [{fixed[0]:+.2f}, {fixed[1]:+.2f}] | "
                     f"{whole['task_aware_hull']['content_gain_pp']:+.2f} | {verdicts.get(name) or 'not distinguishable from 0'} |")
    left = {n: r["whole_tournament"].get("left_out") for n, r in results.items() if (r.get("whole_tournament") or {}).get("left_out")}
    if left:
        lines += ["", "Left out of the nested pool by the CPU budget (`--whole-budget-s`): "
                  + "; ".join(f"{n}: {', '.join(f'{k} ({v})' for k, v in d.items())}" for n, d in left.items()) + "."]
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
                                         f"over all {whole['n_queries']:,} questions, router and strength chosen inside "
                                         f"{whole['folds']} outer folds x {len(whole['seeds'])} fold seeds")
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
                      f"{_ci(free['leak_free']['step_over_label_pp'], free['leak_free']['ci'])} pp averaged over the "
                      f"joule grid (half-pools, a map that cannot re-order models: pairwise AUC "
                      f"{_auc(free['leak_free']['pairwise_auc'])}; reading the candidates' own outcomes instead, which leaks "
                      f"who was right: {_ci(free['inclusive']['step_over_label_pp'], free['inclusive']['ci'])})"
                      if free else
                      f"Knowing each question's difficulty (inclusive) would add "
                      f"{_ci(g['shared_difficulty']['content_gain_pp'], g['shared_difficulty']['ci'])} pp")
        out.append(f"- **{name}**: the best router ({r['best_router']}) "
                   f"{'reads the question beyond its benchmark label' if reads else 'does not beat the benchmark label'} "
                   f"({evidence}); {reader_note(r)}. {difficulty}; the oracle sits "
                   f"{_ci(g['oracle']['content_gain_pp'], g['oracle']['ci'])} pp above the label, "
                   f"{100 * r['oracle_lead']['rare_share']:.0f} % of it from questions only one or two models answer."
                   + forced_note(forced.get(name)))
    return out + ["", "Each claim above is one interval per tournament (marginal 95 %; the whole-tournament step's "
                  "corrected interval where it ran); across tournaments the steps are decided family-wise in the table "
                  "above, and the claims within one ladder in its table.md (Romano-Wolf step-down over every rung's gain "
                  "and every step).", "", "Where the pairwise AUC is near 0.5, the text predicts how hard a question is (a difficulty every "
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
    if (args.tournaments is None and not args.summary_only) or not (OUT / "simulation.json").exists():  # the full plan, or once
        (OUT / "simulation.json").write_text(json.dumps(simulation(), indent=1))
        log("wrote the simulation with known truth")
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
