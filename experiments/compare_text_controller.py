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
memory, and the probe before -> after.
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

from results_readme import write_index, write_readme

RESULTS = Path(__file__).resolve().parent / "results" / "text_controller"
INDEX_ABOUT = """One folder per script run on the 2-core development machine (each README names its CPU and torch
threads), the default `ControllerConfig` unless the command says otherwise: `compare-<tournament>/` by
`experiments/compare_text_controller.py` (compare with the controllers, knn and per-benchmark,
timed, with the training probe), `profile/` by `experiments/profile_text_controller.py` (where a
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
            k: grpo[k] for k in grpo if k.startswith(("expected_reward", "greedy_", "probe_random", "probe_oracle"))
        }})
    return rows


def _mix(mix: dict[str, float]) -> str:
    top = sorted(mix.items(), key=lambda kv: -kv[1])[:3]
    return ", ".join(f"{m} {s:.2f}" for m, s in top)


def machine() -> dict[str, Any]:
    """The CPU the run's time belongs to: its model and whether routing could use bf16 units
    (``eval.dtype="auto"``), which made routing ~5x cheaper where it could."""
    from routing_gym_agents.controller_model import cpu_has_bf16_matmul

    cpuinfo = Path("/proc/cpuinfo")
    names = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.M) if cpuinfo.exists() else []
    return {"cpu": names[0].strip() if names else platform.processor() or "unknown", "cpus": os.cpu_count(),
            "bf16_matmul": cpu_has_bf16_matmul()}


def readme_about(timing: dict[str, Any], probe: list[dict[str, Any]], table: str) -> str:
    """The README's text after its title and command: the run's cost, the probe, compare's table."""
    lines = [
        f"Whole run: {timing['wall_s']:.0f} s wall, {timing['cpu_s']:.0f} s CPU (user + system, every process), peak "
        f"memory {timing['peak_rss_gb']} GB (largest process), on {_machine_words(timing)} (`run.json`: the "
        "compare command it ran; wall time depends on the machine's load).",
        "",
        "## Training probe: after SFT -> after GRPO",
        "",
        "The probe is exact (one forward pass per query, no sampling): the sampling policy's expected reward and the "
        "greedy policy's selection mix on the first GRPO training queries.",
        "",
        "| agent | seed | expected reward before -> after | greedy reward before -> after | greedy top-1 share "
        "before -> after | greedy mix before | greedy mix after | random route | oracle |",
        "|---|---|---:|---:|---:|---|---|---:|---:|",
    ]
    for r in probe:
        lines.append(
            f"| {r['agent']} | {r['seed']} | {r['expected_reward_before']:.3f} -> {r['expected_reward_after']:.3f} | "
            f"{r['greedy_reward_before']:.3f} -> {r['greedy_reward_after']:.3f} | "
            f"{r['greedy_top1_share_before']:.2f} -> {r['greedy_top1_share_after']:.2f} | "
            f"{_mix(r['greedy_mix_before'])} | {_mix(r['greedy_mix_after'])} | {r['probe_random_route_reward']:.3f} | "
            f"{r['probe_oracle_reward']:.3f} |"
        )
    if not probe:
        lines.append("| (no GRPO agent in the run) | | | | | | | | |")
    lines += ["", "## compare's table (`table.md`)", "", table.strip(), ""]
    return "\n".join(lines)


def _machine_words(timing: dict[str, Any]) -> str:
    if "cpu" not in timing:  # run.json of a run before the machine was recorded
        return "a 2-core machine"
    units = ("bf16 matrix units", "bfloat16") if timing["bf16_matmul"] else ("no bf16 matrix units", "float32")
    threads = timing.get("torch_threads", 1)  # runs before it was recorded set OMP_NUM_THREADS=1
    return (f"{timing['cpus']} cores of {timing['cpu']} ({units[0]}: routing in {units[1]}), "
            f"{threads} torch thread{'s' if threads > 1 else ''} per process")


def write_readmes(out: Path, tournament: str, argv: list[str]) -> None:
    """``out/README.md`` from the folder's files, and the index of ``out``'s parent."""
    timing = json.loads((out / "run.json").read_text())
    probe = _probe_rows(out / "reports")
    table = (out / "table.md").read_text() if (out / "table.md").exists() else ""
    write_readme(out, f"Text controller on `{tournament}`: compare", readme_about(timing, probe, table), argv)
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
    if args.readme_only:
        write_readmes(out, args.tournament, shown_argv)
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
