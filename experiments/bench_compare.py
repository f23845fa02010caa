"""Benchmark (not a test): how long ``compare`` takes, each job beside a reference measured in
the same run.

    OMP_NUM_THREADS=1 ROUTING_GYM_DATA_DIR=../shared/data python experiments/bench_compare.py \\
        --jobs large,main,mmlu-pro --n-queries 300000 --before COMMIT --knn-check 10000 \\
        --out experiments/results/bench-compare

Jobs (each a fresh subprocess, so its time and peak memory are its own; CPU time is the
process's and its children's, the audit's process included):

- ``large``: ``compare`` with the default agents, 1 seed, on a procedural paper-pool of
  ``--n-queries`` questions (``routing-gym data generate``), beside the shipped paper-pool
  (1 seed) as its reference: wall, the time in the aggregation step (every bootstrap interval,
  hull gain, dominance test and per-benchmark table: an upper bound on the statistics' share),
  the slowest fits and peak RSS. Target: wall <= 300 s at 300,000 queries.
- ``main``: the README's main job, ``routing-gym compare --out results`` (default agents, 5
  seeds, audit on). Target: <= 60 s CPU.
- ``mmlu-pro``: ``routing-gym compare --tournament mmlu-pro`` (needs ``ROUTING_GYM_DATA_DIR``).
  Target: <= 120 s wall on an idle machine.

``--before COMMIT`` runs every job a second time on that commit's code (``git archive`` into a
temporary folder, first on ``PYTHONPATH``), back to back with the current code, and prints
after / before ratios and whether the two ``table.md`` are byte-identical. ``--knn-check N``
routes the large tournament's first ``N`` held-out queries with ``knn``'s index and with
scikit-learn's brute-force cosine search on the same features: agreement, accuracy of each
(target: within 0.2 pp) and time per query. ``--out`` writes ``results.json`` and a README.
The machine is shared: each job's ``uptime`` load is recorded beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_readme import write_index, write_readme  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TARGET_LARGE_WALL_S, TARGET_MAIN_CPU_S, TARGET_MMLU_PRO_WALL_S, TARGET_KNN_PP = 300.0, 60.0, 120.0, 0.2
PACKAGES = {"routing_gym": "routing_gym", "routing_gym_agents": "agents", "routing_gym_envs_data": "envs_data"}


def in_process_run(tournament: str, n_bootstrap: int, out: str) -> dict:
    """Runs in the child process: one compare (1 seed), timed, with the aggregation timed apart."""
    from routing_gym.eval import compare

    timings = {"aggregate_s": 0.0}
    aggregate = compare.aggregate

    def timed_aggregate(*args, **kwargs):
        tic = time.perf_counter()
        try:
            return aggregate(*args, **kwargs)
        finally:
            timings["aggregate_s"] += time.perf_counter() - tic

    compare.aggregate = timed_aggregate  # CompareJob.result looks it up in compare's namespace
    config = compare.CompareConfig(tournament=tournament, seeds=1, n_bootstrap=n_bootstrap, progress=False)
    tic = time.perf_counter()
    result = compare.run_compare(config)
    wall = time.perf_counter() - tic
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "table.md").write_text(compare.markdown_report(result))
    agents = [r for r in result.runs if r.kind == "agent"]
    return {
        "n_queries": result.tournament.n_queries, "n_test": int(len(result.test_rows)), "methods": len(result.rows),
        "wall_s": wall, "aggregate_s": timings["aggregate_s"],
        "fit_s": {r.method: round(r.fit_s + r.act_s + ((r.audit or {}).get("seconds") or 0.0), 2) for r in agents},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # Linux: KiB
        "failures": [f"{f.method}: {f.error}" for f in result.failures],
    }


def knn_check(tournament: str, n: int) -> dict:
    """Runs in the child process: knn's index against brute-force cosine on the same features."""
    import numpy as np
    from sklearn.neighbors import NearestNeighbors

    from routing_gym.envs import Reward
    from routing_gym.envs.observation import ObservationBatch
    from routing_gym.sources import resolve_tournament
    from routing_gym_agents import FitContext, make_agent

    t = resolve_tournament(tournament)
    agent = make_agent("knn")
    agent.fit(FitContext(tournament=t, reward=Reward("gated_rank"), train_split="train", seed=0, progress=False))
    rows = t.split_rows("test")[:n]
    batch = ObservationBatch.from_tournament(t, rows)
    tic = time.process_time()
    indexed = agent.act_batch(batch)
    index_ms = 1000 * (time.process_time() - tic) / len(rows)
    # the reference: the same features, scikit-learn's cosine metric (knn before its index)
    train = agent.featurizer.transform(ObservationBatch.from_tournament(t, t.split_rows("train")))
    brute = NearestNeighbors(n_neighbors=agent.k + 1, metric="cosine").fit(train)
    tic = time.process_time()
    distances, neighbours = brute.kneighbors(agent.batch_features(batch))
    reference = (agent.train_error[neighbours[:, :agent.k]].mean(axis=1) + agent.cost_weight * agent.costs).argmin(axis=1)
    brute_ms = 1000 * (time.process_time() - tic) / len(rows)
    # exact searches differ only in which of equally distant rows they keep: how often the k-th ties the next
    ties = float(np.isclose(distances[:, agent.k - 1], distances[:, agent.k], rtol=0, atol=1e-9).mean())
    correct = t.correct[rows]
    accuracy = [100 * float(correct[np.arange(len(rows)), a].mean()) for a in (indexed, reference)]
    return {"n": int(len(rows)), "agreement": float((indexed == reference).mean()), "accuracy_index": accuracy[0],
            "accuracy_brute": accuracy[1], "index_ms_per_query": index_ms, "brute_ms_per_query": brute_ms,
            "tie_at_k": ties}


def checkout(commit: str, root: Path) -> Path:
    """``commit``'s packages under ``root/pkgs`` (to put first on PYTHONPATH)."""
    tree = root / "tree"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    pkgs = root / "pkgs"
    pkgs.mkdir()
    for package, folder in PACKAGES.items():
        (pkgs / package).symlink_to(tree / folder, target_is_directory=True)
    return pkgs


def timed(cmd: list[str], pythonpath: Path | None, cwd: Path) -> dict:
    """Run ``cmd``; wall and CPU (user + system of it and its children) seconds, the load around it."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), *filter(None, [env.get("PYTHONPATH")])])
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    tic = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    wall = time.perf_counter() - tic
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "load_before": load, "load_after": os.getloadavg()[0], "stdout": proc.stdout}


def run_job(job: str, data: Path, pythonpath: Path | None, work: Path, n_bootstrap: int) -> dict:
    """One job on one version of the code; ``work`` is its own folder (outputs, table.md)."""
    work.mkdir(parents=True)
    if job in ("large", "reference"):
        tournament = str(data) if job == "large" else "paper-pool"
        cmd = [sys.executable, __file__, "--child", tournament, "--bootstrap", str(n_bootstrap), "--out", str(work)]
        r = timed(cmd, pythonpath, work)
        r.update(json.loads(r.pop("stdout").strip().splitlines()[-1]))
        return r
    args = ["--tournament", "mmlu-pro"] if job == "mmlu-pro" else []
    r = timed([sys.executable, "-m", "routing_gym", "compare", *args, "--out", "results"], pythonpath, work)
    r.pop("stdout")
    return r


def describe(label: str, r: dict) -> str:
    text = f"{label}: wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s (load {r['load_before']:.1f} -> {r['load_after']:.1f})"
    if "aggregate_s" in r:
        slowest = sorted(r["fit_s"].items(), key=lambda kv: -kv[1])[:4]
        text += (f"; {r['n_queries']:,} queries ({r['n_test']:,} held out), aggregation {r['aggregate_s']:.1f} s "
                 f"({r['aggregate_s'] / r['wall_s']:.1%}), peak RSS {r['peak_rss_mb']:,.0f} MB; slowest fit + act + audit (s): "
                 + ", ".join(f"{m} {s:.1f}" for m, s in slowest))
        if r["failures"]:
            text += f"; failures: {r['failures']}"
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", default="large", help="comma-separated: large, main, mmlu-pro")
    parser.add_argument("--n-queries", type=int, default=300_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bootstrap", type=int, default=2000)
    parser.add_argument("--before", default=None, help="a commit to run every job on too (its code, this run)")
    parser.add_argument("--knn-check", type=int, default=0, help="held-out queries of the large tournament for the knn check")
    parser.add_argument("--data", default=None, help="where to keep the generated tournament (default: a temporary folder)")
    parser.add_argument("--out", default=None, help="write results.json and README.md here")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-knn", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(in_process_run(args.child, args.bootstrap, args.out)))
        return 0
    if args.child_knn:
        print(json.dumps(knn_check(args.child_knn, args.knn_check)))
        return 0

    jobs = [j.strip() for j in args.jobs.split(",") if j.strip()]
    unknown = set(jobs) - {"large", "main", "mmlu-pro"}
    if unknown:
        parser.error(f"unknown job(s) {sorted(unknown)}; choose from large, main, mmlu-pro")
    if "large" in jobs:
        jobs.insert(jobs.index("large"), "reference")
    results: dict = {"jobs": {}, "knn": None, "before": args.before, "cpus": os.cpu_count()}
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = Path(args.data or tmp) / f"paper-pool-{args.n_queries}"
        if ("large" in jobs or args.knn_check) and not (data / "card.json").exists():
            subprocess.run([sys.executable, "-m", "routing_gym", "data", "generate", "--preset", "paper-pool",
                            "--n-queries", str(args.n_queries), "--seed", str(args.seed), "--out", str(data)],
                           check=True, stdout=subprocess.DEVNULL)
        versions = {"after": None}
        if args.before:
            versions = {"before": checkout(args.before, tmp / "before"), "after": None}
        for job in jobs:
            runs = {name: run_job(job, data, path, tmp / job / name, args.bootstrap) for name, path in versions.items()}
            for name, r in runs.items():
                say(describe(f"{job} [{name}]", r))
            if "before" in runs:
                b, a = runs["before"], runs["after"]
                same = (tmp / job / "before" / "results" / "table.md", tmp / job / "after" / "results" / "table.md")
                if job in ("large", "reference"):
                    same = (tmp / job / "before" / "table.md", tmp / job / "after" / "table.md")
                identical = same[0].read_bytes() == same[1].read_bytes()
                say(f"  {job} after / before: wall {a['wall_s'] / b['wall_s']:.2f}x, CPU {a['cpu_s'] / b['cpu_s']:.2f}x; "
                    f"table.md byte-identical: {'yes' if identical else 'no'}")
                runs["table_identical"] = identical
            results["jobs"][job] = runs
        after = {job: runs["after"] for job, runs in results["jobs"].items()}
        if "large" in after:
            ratio = after["large"]["wall_s"] / after["reference"]["wall_s"]
            say(f"  large / reference (after): wall {ratio:.1f}x for "
                f"{after['large']['n_queries'] / after['reference']['n_queries']:.0f}x the queries")
        if args.knn_check:
            cmd = [sys.executable, __file__, "--child-knn", str(data), "--knn-check", str(args.knn_check)]
            k = json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1])
            results["knn"] = k
            say(f"knn on {k['n']:,} held-out queries of {args.n_queries:,}: index {k['index_ms_per_query']:.2f} ms/query "
                f"vs brute-force cosine {k['brute_ms_per_query']:.2f} ms/query ({k['brute_ms_per_query'] / k['index_ms_per_query']:.1f}x); "
                f"same route {k['agreement']:.2%}; accuracy {k['accuracy_index']:.2f} % vs {k['accuracy_brute']:.2f} % "
                f"({k['accuracy_index'] - k['accuracy_brute']:+.2f} pp); the k-th neighbour ties the next one for "
                f"{k['tie_at_k']:.0%} of queries (both searches are exact: they differ in which tied rows they keep)")
    checks = []
    if "large" in after:
        checks.append((after["large"]["wall_s"] <= TARGET_LARGE_WALL_S, f"large compare wall <= {TARGET_LARGE_WALL_S:g} s"))
    if "main" in after:
        checks.append((after["main"]["cpu_s"] <= TARGET_MAIN_CPU_S, f"main job CPU <= {TARGET_MAIN_CPU_S:g} s"))
    if "mmlu-pro" in after:
        checks.append((after["mmlu-pro"]["wall_s"] <= TARGET_MMLU_PRO_WALL_S,
                       f"mmlu-pro wall <= {TARGET_MMLU_PRO_WALL_S:g} s (the target is for an idle machine)"))
    if results["knn"]:
        k = results["knn"]
        checks.append((abs(k["accuracy_index"] - k["accuracy_brute"]) <= TARGET_KNN_PP, f"knn within {TARGET_KNN_PP} pp of brute force"))
    for ok, text in checks:
        say(f"  [{'met' if ok else 'MISSED'}] {text}")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        write_readme(out, "compare: time per job, before and after, with their references",
                     f"Ran on a {os.cpu_count()}-core machine shared with other work (each line gives the 1-minute load "
                     "before -> after its job); CPU is user + system seconds of the job and its children (the audit's "
                     "process included). `before` is the code of the commit given to `--before`, run back to back with "
                     "the current code. `results.json` holds every number.\n\n```\n" + "\n".join(lines) + "\n```\n")
        if out.parent.name == "bench-compare":  # one folder per invocation (jobs), indexed
            write_index(out.parent, "compare: time per job", "Each folder is one run of `experiments/bench_compare.py`: "
                        "its jobs beside their references (see the script's docstring for the targets).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
