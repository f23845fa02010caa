"""The text controller's comparison run (not a test): ``routing-gym compare`` with the default
controller configuration beside knn and per-benchmark routing, timed, with the controller's
training probe (expected reward and greedy selection mix, after SFT -> after GRPO).

    .venv/bin/python experiments/compare_text_controller.py --tournament specialist-pool

(``--threads``: torch threads per process, by default ``OMP_NUM_THREADS`` or else every core.
On an otherwise idle machine every core is right, since compare's driver and its audit process
take turns and never run at once; on a busy one pass ``--threads 1``. ``run.json`` records it.)

runs ``routing-gym compare --tournament specialist-pool --agents grpo,kl-grpo,sft,knn,per-benchmark
--seeds 1`` (every option after ``--`` goes to compare as well) under ``/usr/bin/time -v`` (CPU
time and peak memory of the whole run) and writes
``experiments/results/text_controller/compare-<tournament>/``: compare's own files (``table.md``,
``frontier.md``, ``results.json``, ...), each controller's training report under
``reports/<agent>/seed-<seed>/`` and a ``README.md`` naming the command, the run's time and
memory, each controller's routing choice (alpha and decoding, chosen on validation), the probe
before -> after, and the SFT teacher (the label-aware regression SFT's targets come from) read on
the held-out queries beside the controllers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from results_readme import write_index, write_readme

RESULTS = Path(__file__).resolve().parent / "results" / "text_controller"
INDEX_ABOUT = """One folder per script run on the 2-core development machine (each README names its CPU and torch
threads), the default `ControllerConfig` unless the command says otherwise: `compare-<tournament>/` by
`experiments/compare_text_controller.py` (compare with the controllers, knn and per-benchmark,
timed, with the training probe and the SFT teacher read on held-out queries), `profile/` by `experiments/profile_text_controller.py` (where a
training step's time goes). Energy of `zeroeval-math` and `llmrouter` is derived from ML.ENERGY
joules-per-token figures; `specialist-pool` is procedural (synthetic energy)."""
CONTROLLERS = ("sft", "grpo", "kl-grpo")
DEFAULT_AGENTS = "grpo,kl-grpo,sft,knn,per-benchmark"


def _time_v(stderr: str) -> dict[str, float]:
    """CPU seconds, wall seconds and peak RSS (GB) from ``/usr/bin/time -v``'s report."""
    fields = {
        "user_s": r"User time \(seconds\): ([\d.]+)",
        "system_s": r"System time \(seconds\): ([\d.]+)",
        "max_rss_kb": r"Maximum resident set size \(kbytes\): (\d+)",
        "wall": r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)",
    }
    found = {k: re.search(p, stderr) for k, p in fields.items()}
    if not all(found.values()):
        raise RuntimeError("no /usr/bin/time -v report in the run's stderr")
    parts = [float(x) for x in found["wall"].group(1).split(":")]
    wall = sum(v * 60 ** i for i, v in enumerate(reversed(parts)))
    user, system = float(found["user_s"].group(1)), float(found["system_s"].group(1))
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(user + system, 1),
        "peak_rss_gb": round(int(found["max_rss_kb"].group(1)) / 1e6, 2),  # of the largest process
    }


def _probe_rows(reports: Path) -> list[dict[str, Any]]:
    rows = []
    for summary in sorted(reports.glob("*/seed-*/summary.json")):
        grpo = json.loads(summary.read_text()).get("grpo") or {}
        if "expected_reward_before" not in grpo:
            continue
        rows.append({"agent": summary.parent.parent.name, "seed": summary.parent.name, **{
            k: grpo[k] for k in grpo
            if k.startswith(("expected_reward", "greedy_", "sampled_", "probe_random", "probe_oracle"))
        }})
    return rows


def _route_rows(reports: Path) -> list[dict[str, Any]]:
    """Each controller's routing choice (``controller.policy``) from its training report."""
    rows = []
    for summary in sorted(reports.glob("*/seed-*/summary.json")):
        route = json.loads(summary.read_text()).get("route")
        if route:
            rows.append({"agent": summary.parent.parent.name, "seed": summary.parent.name, **route})
    return rows


def _route_lines(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = ["## Routing choice (on a validation part of train, at compare's reward)", "",
             "Each controller routes by the per-benchmark route's train score + alpha x its log-probabilities "
             "(centred within the benchmark), greedily or by sampling; alpha = 0 is the label alone. A GRPO "
             "controller routes by its GRPO model or, where that is worth less on validation, by its SFT model "
             "(`grpo.keep_sft_if_better`): the best validation reward of each, and which routes.", "",
             "| agent | seed | alpha | decoding | validation reward: chosen | label only | GRPO model | SFT model "
             "| routes by | validation queries |",
             "|---|---|---|---|---:|---:|---:|---:|---|---:|"]

    def best_of(values: dict[str, float] | None) -> str:
        return f"{max(values.values()):.3f}" if values else "—"

    for r in rows:
        values = r.get("validation_value") or {}
        label = f"{values['label only']:.3f}" if "label only" in values else "—"
        by = "—" if "grpo_kept" not in r else ("GRPO model" if r["grpo_kept"] else "SFT model")
        lines.append(f"| {r['agent']} | {r['seed']} | {r['alpha']} | {r['decoding']} | {best_of(values)} | {label} | "
                     f"{best_of(r.get('validation_value_grpo'))} | {best_of(r.get('validation_value_sft'))} | {by} | "
                     f"{r.get('validation_queries', 0)} |")
    return [*lines, ""]


def _curve_lines(reports: Path) -> list[str]:
    """The GRPO curves (each GRPO fit's ``grpo_reward.png``) and what the step log says of them:
    the reward and top-1 share over the first and last three steps, the share of groups without
    reward spread, and the KL penalty beside the reward's spread (is KL-GRPO any different?)."""
    fits = []
    for steps_csv in sorted(reports.glob("*/seed-*/grpo_steps.csv")):
        steps = np.genfromtxt(steps_csv, delimiter=",", names=True)
        summary = json.loads((steps_csv.parent / "summary.json").read_text())
        fits.append((steps_csv.parent, np.atleast_1d(steps), summary))
    if not fits:
        return []
    lines = ["## GRPO curves", "",
             "From each GRPO fit's step log (`reports/<agent>/seed-*/grpo_steps.csv`; plots beside it): mean over "
             "the first -> last three steps. Penalty = beta x KL at the last step, in reward units, beside the "
             "mean within-group reward spread (std) the advantages come from.", "",
             "| agent | seed | steps x prompts trained (sampled) x generations | queries left out (models' rewards equal) "
             "| mean reward first -> last | top-1 share first -> last | sampled groups without reward spread | trained "
             "prompts with spread / prompts a step | beta | KL last | penalty last | reward spread |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    kl_notes = []
    for folder, steps, summary in fits:
        grpo, config = summary["grpo"], summary["config"]["grpo"]
        head, tail = steps[:3], steps[-3:]
        beta, kl_last = grpo.get("beta", 0.0), float(steps["kl"][-1])
        # TRL computes no KL without a penalty (beta 0: the column is empty)
        kl_words = f"{kl_last:.4f} | {beta * kl_last:.5f}" if beta else "— | 0"
        if beta:
            share = beta * kl_last / float(steps["reward_std"].mean())
            kl_notes += [f"{folder.parent.name} {folder.name}: the KL penalty at the last step is {100 * share:.2f} % of "
                         "the reward spread" + (": the policy moves so little from the SFT model in these steps that at "
                                                "this scale the penalty cannot make it route otherwise than GRPO alone"
                                                if share < 0.01 else "") + ".", ""]
        lines.append(
            f"| {folder.parent.name} | {folder.name} | {len(steps)} x {config['prompts_per_step']} "
            f"({config.get('oversample', 1) * config['prompts_per_step']}) x {config['num_generations']} | {grpo.get('flat_queries_skipped', 0)} of {grpo.get('n_queries', '—')} | "
            f"{head['mean_reward'].mean():.3f} -> {tail['mean_reward'].mean():.3f} | "
            f"{head['top1_share'].mean():.2f} -> {tail['top1_share'].mean():.2f} | "
            f"{steps['frac_reward_zero_std'].mean():.2f} | {np.nanmean(steps['groups_with_spread']):.2f} | {beta:.3f} | {kl_words} | {steps['reward_std'].mean():.3f} |")
    lines += ["", *kl_notes]
    for folder, _, _ in fits:
        plot = folder / "grpo_reward.png"
        if plot.exists():
            lines.append(f"![{folder.parent.name} {folder.name}: GRPO reward]({plot.relative_to(reports.parent)})")
    return [*lines, ""]


def _mix(mix: dict[str, float]) -> str:
    top = sorted(mix.items(), key=lambda kv: -kv[1])[:3]
    return ", ".join(f"{m} {s:.2f}" for m, s in top)


def machine() -> dict[str, Any]:
    """The CPU the run's time belongs to: its model and whether routing could use bf16 units
    (``eval.dtype="auto"``), which made routing ~5x cheaper where it could."""
    from routing_gym_agents.controller.model import cpu_has_bf16_matmul

    cpuinfo = Path("/proc/cpuinfo")
    names = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.M) if cpuinfo.exists() else []
    return {"cpu": names[0].strip() if names else platform.processor() or "unknown", "cpus": os.cpu_count(),
            "bf16_matmul": cpu_has_bf16_matmul()}


def sft_teacher(out: Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The SFT targets' teacher (``controller.teacher``: the benchmark's mean reward plus a ridge on
    TF-IDF of the query as the run's prompt shows it) fitted on the training split and read on the
    held-out one, scored with compare's reward (``settings``: results.json's); None when the run's
    SFT used other targets, predates this teacher (its config has no ``sft.target_folds``; its
    README, regenerated, has no teacher section) or no controller left a report."""
    from routing_gym.envs import Reward
    from routing_gym.sources import resolve_tournament
    from routing_gym.tournament.scoring import score_actions
    from routing_gym_agents.controller.config import ControllerConfig
    from routing_gym_agents.controller.prompt import ModelLegend
    from routing_gym_agents.controller.teacher import teacher_rewards
    from routing_gym_agents.controller.trainer import user_texts

    summaries = sorted((out / "reports").glob("*/seed-*/summary.json"))
    if not summaries:
        return None
    trained = json.loads(summaries[0].read_text())["config"]  # the config the controller trained with
    if trained["sft"]["targets"] != "predicted" or "target_folds" not in trained["sft"]:
        return None
    config = ControllerConfig.from_dict(trained)
    controller = summaries[0].parent.parent.name
    t = resolve_tournament(settings["tournament"]["name"])
    train, test = t.split_rows(settings["tournament"]["train_split"]), t.split_rows(settings["tournament"]["test_split"])
    builder = config.prompt.builder(ModelLegend.from_tournament(t))
    spec = settings["reward"]
    reward = Reward(spec["name"], spec["coefficients"], invalid_penalty=spec["invalid_penalty"])
    # None: the controllers' SFT targets maximise compare's reward (GRPO's), else the stated lambda_e.
    energy_coef = config.sft.energy_coef
    target_reward = reward if energy_coef is None else Reward("gated_rank", {"lambda_e": energy_coef})
    codes = t.benchmark_codes
    routes = teacher_rewards(user_texts(builder, t, train), target_reward.matrix(t, train), codes[train],
                             user_texts(builder, t, test), codes[test], len(t.benchmarks),
                             config.sft.target_ridge_alpha).argmax(axis=1)
    metrics = score_actions(reward.matrix(t, test), t.outcomes(test), routes, reward.invalid_penalty).metrics()
    counts = np.bincount(routes, minlength=t.n_models)
    return {**metrics, "top1_share": counts.max() / len(routes), "top1_model": t.model_ids[int(counts.argmax())],
            "agent": controller, "max_question_chars": config.prompt.max_question_chars,
            "target_reward": target_reward.describe(), "reward": spec["describe"]}


def _teacher_lines(teacher: dict[str, Any] | None, rows: list[dict[str, Any]]) -> list[str]:
    if teacher is None:
        return []
    lines = [
        "## The SFT teacher on held-out queries",
        "",
        f"SFT imitates `controller.teacher`: every model's reward ({teacher['target_reward']}) predicted as its mean "
        f"on the query's benchmark plus a ridge regression on TF-IDF features of the query as `{teacher['agent']}`'s "
        f"prompt shows it (benchmark name and first {teacher['max_question_chars']} characters); SFT's targets were "
        "cross-fitted on its rows. Fitted here on the whole training split and read on the held-out queries it never "
        "saw (no language model involved), it is what imitating the targets could reach: a controller below it did "
        "not learn what its targets read in the text.",
        "",
        f"| router | {teacher['reward']} | accuracy % | mean J | top-1 share |",
        "|---|---:|---:|---:|---|",
        f"| SFT teacher (ridge on TF-IDF) | {teacher['mean_reward']:.3f} | {100 * teacher['accuracy']:.1f} | "
        f"{teacher['mean_energy_j']:.1f} | {teacher['top1_share']:.2f} ({teacher['top1_model']}) |",
    ]
    for row in rows:
        if row["method"] in (*CONTROLLERS, "per-benchmark") and row.get("mean_reward") is not None:
            lines.append(f"| {row['method']} | {row['mean_reward']:.3f} | {100 * row['accuracy']:.1f} | "
                         f"{row['mean_energy_j']:.1f} | {row['top1_share']:.2f} ({row['top1_model']}) |")
    return [*lines, ""]


def readme_about(timing: dict[str, Any], probe: list[dict[str, Any]], table: str,
                 teacher_lines: list[str] | None = None, route_lines: list[str] | None = None,
                 curve_lines: list[str] | None = None) -> str:
    """The README's text after its title and command: the run's cost, the routing choice, the
    probe, the GRPO curves, the SFT teacher on held-out queries, compare's table."""
    lines = [
        f"Whole run: {timing['wall_s']:.0f} s wall, {timing['cpu_s']:.0f} s CPU (user + system, every process), peak "
        f"memory {timing['peak_rss_gb']} GB (largest process), on {_machine_words(timing)} (`run.json`: the "
        "compare command it ran; wall time depends on the machine's load).",
        "",
        *(route_lines or []),
        "## Training probe: after SFT -> after GRPO",
        "",
        "The probe is exact (one forward pass per query, no sampling) and reads the controller alone, both decodings: "
        "the sampling policy's expected reward and top-1 share, the greedy policy's reward and selection mix, on the "
        "first GRPO training queries.",
        "",
        "| agent | seed | expected (sampled) reward before -> after | greedy reward before -> after | sampled top-1 "
        "share before -> after | greedy top-1 share before -> after | greedy mix before | greedy mix after | "
        "random route | oracle |",
        "|---|---|---:|---:|---:|---:|---|---|---:|---:|",
    ]
    for r in probe:
        sampled = (f"{r['sampled_top1_share_before']:.2f} -> {r['sampled_top1_share_after']:.2f}"
                   if "sampled_top1_share_before" in r else "—")  # runs before it was recorded
        lines.append(
            f"| {r['agent']} | {r['seed']} | {r['expected_reward_before']:.3f} -> {r['expected_reward_after']:.3f} | "
            f"{r['greedy_reward_before']:.3f} -> {r['greedy_reward_after']:.3f} | {sampled} | "
            f"{r['greedy_top1_share_before']:.2f} -> {r['greedy_top1_share_after']:.2f} | "
            f"{_mix(r['greedy_mix_before'])} | {_mix(r['greedy_mix_after'])} | {r['probe_random_route_reward']:.3f} | "
            f"{r['probe_oracle_reward']:.3f} |"
        )
    if not probe:
        lines.append("| (no GRPO agent in the run) | | | | | | | | | |")
    lines += ["", *(curve_lines or []), *(teacher_lines or []), "## compare's table (`table.md`)", "", table.strip(), ""]
    return "\n".join(lines)


def _machine_words(timing: dict[str, Any]) -> str:
    if "cpu" not in timing:  # run.json of a run before the machine was recorded
        return "a 2-core machine"
    units = ("bf16 matrix units", "bfloat16") if timing["bf16_matmul"] else ("no bf16 matrix units", "float32")
    threads = timing.get("torch_threads", 1)  # runs before it was recorded set OMP_NUM_THREADS=1
    return (f"{timing['cpus']} cores of {timing['cpu']} ({units[0]}: routing in {units[1]}), "
            f"{threads} torch thread{'s' if threads > 1 else ''} per process")


def write_readmes(out: Path, tournament: str, argv: list[str], started_on: str | None = None) -> None:
    """``out/README.md`` from the folder's files, and the index of ``out``'s parent;
    ``started_on``: the commit the run started on (default: this process's)."""
    timing = json.loads((out / "run.json").read_text())
    probe = _probe_rows(out / "reports")
    table = (out / "table.md").read_text() if (out / "table.md").exists() else ""
    results = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else None
    rows = results["rows"] if results else []
    teacher = sft_teacher(out, results["settings"]) if results else None
    write_readme(out, f"Text controller on `{tournament}`: compare",
                 readme_about(timing, probe, table, _teacher_lines(teacher, rows), _route_lines(_route_rows(out / "reports")),
                              _curve_lines(out / "reports")),
                 argv, started_on=started_on)
    write_index(out.parent, "Text controller results (SFT -> GRPO -> KL-GRPO, SmolLM2-135M-Instruct on CPU)", INDEX_ABOUT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tournament", default="specialist-pool")
    parser.add_argument("--agents", default=DEFAULT_AGENTS)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--name", default=None, help="folder name (default: compare-<tournament>)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--readme-only", action="store_true", help="rewrite the READMEs from the folder's files")
    parser.add_argument("--agent-kwargs", default="{}", help="compare's --agent-kwargs (each controller also gets its report_dir)")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1),
                        help="torch threads per process (default: OMP_NUM_THREADS, else every core)")
    args, extra = parser.parse_known_args(argv)
    extra = [x for x in extra if x != "--"]
    given_kwargs = json.loads(args.agent_kwargs)
    out = args.out / (args.name or f"compare-{args.tournament}")
    given = list(sys.argv if argv is None else ["experiments/compare_text_controller.py", *argv])
    shown_argv = [a for a in given if a != "--readme-only"]
    if args.readme_only:  # the results are the run's: so is the commit the README names
        found = re.search(r"started on commit ([^)]+)\)", (out / "README.md").read_text())
        write_readmes(out, args.tournament, shown_argv, started_on=found.group(1) if found else None)
        return 0
    agents = args.agents.split(",")
    with tempfile.TemporaryDirectory(prefix="controller-compare-") as scratch:
        run_dir = Path(scratch) / "run"
        reports = Path(scratch) / "reports"
        kwargs = {**given_kwargs, **{a: {**given_kwargs.get(a, {}), "report_dir": str(reports / a)}
                                     for a in agents if a in CONTROLLERS}}
        shown = ["routing-gym", "compare", "--tournament", args.tournament, "--agents", args.agents,
                 "--seeds", str(args.seeds), *extra, *(["--agent-kwargs", args.agent_kwargs] if given_kwargs else [])]
        cli = [str(Path(sys.executable).with_name("routing-gym")), *shown[1:], "--out", str(run_dir),
               "--agent-kwargs", json.dumps(kwargs)]
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
        done = subprocess.run(["/usr/bin/time", "-v", *cli], env=env, stderr=subprocess.PIPE, text=True)
        sys.stderr.write(done.stderr[-4000:])
        if done.returncode != 0:
            return done.returncode
        timing = _time_v(done.stderr)
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(run_dir, out, ignore=shutil.ignore_patterns("cells"))
        if reports.exists():
            shutil.copytree(reports, out / "reports")
    # Committed files keep no machine paths: the scratch directories are cut.
    for path in out.rglob("*"):
        if path.suffix in (".json", ".md", ".csv") and path.is_file():
            text = path.read_text()
            cut = re.sub(re.escape(scratch) + r"/?", "", text).replace(str(Path.home()), "~")
            if cut != text:
                path.write_text(cut)
    run = {"command": shown, **timing, **machine(), "torch_threads": args.threads}
    (out / "run.json").write_text(json.dumps(run, indent=2) + "\n")
    write_readmes(out, args.tournament, shown_argv)
    print(f"wrote {out} ({timing})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
