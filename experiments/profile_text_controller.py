"""Where a text-controller training step spends its time (not a test): tokens per prompt, and
the forward / backward / sampling / routing seconds of one step, per prompt layout.

For each layout (the 16-model legend shown or not, and how much of the question is kept) it
builds the real SFT records of ``specialist-pool`` (or ``--tournament``), then times with the
default LoRA (top layers) on SmolLM2-135M-Instruct, one torch thread:

- an SFT micro-batch: forward (loss on the completion) and backward, separately;
- a GRPO step's sampling: ``prompts_per_step x num_generations`` completions of <= 8 tokens;
- routing 16 queries with the (merged) model: greedy decoding versus one forward pass for the
  choice distribution, in float32 and in the bfloat16 copy ``eval.dtype`` may route with.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/profile_text_controller.py

Writes ``experiments/results/text_controller/profile/`` (``profile.json`` and ``README.md``).
Seconds are wall time on a shared machine; ``cpu_s`` beside each says how much of it was this
process's CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from results_readme import write_readme

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "text_controller" / "profile"
LAYOUTS = {  # name -> prompt settings
    "legend, question cut at 200 chars (previous default)": {"show_legend": True, "max_question_chars": 200},
    "no legend, question cut at 200 chars": {"show_legend": False, "max_question_chars": 200},
    "no legend, question cut at 120 chars": {"show_legend": False, "max_question_chars": 120},
}


def timed(fn: Callable[[], Any], repeats: int) -> dict[str, float]:
    """Median wall and CPU seconds of ``fn`` over ``repeats`` calls (after one warm-up)."""
    fn()
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return {"wall_s": round(statistics.median(walls), 3), "cpu_s": round(statistics.median(cpus), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tournament", default="specialist-pool")
    parser.add_argument("--batch", type=int, default=8, help="SFT micro-batch (prompts)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--readme-only", action="store_true", help="rewrite README.md from OUT/profile.json")
    args = parser.parse_args(argv)
    if args.readme_only:
        argv_shown = [a for a in sys.argv if a != "--readme-only"]
        write_readme(args.out, TITLE, readme_about(json.loads((args.out / "profile.json").read_text())), argv_shown)
        return 0

    import torch
    from peft import get_peft_model

    torch.set_num_threads(1)
    from routing_gym.envs import Reward
    from routing_gym.envs.rewards import oracle_targets
    from routing_gym.sources import resolve_tournament
    from routing_gym_agents.controller.config import ControllerConfig
    from routing_gym_agents.controller.inference import choice_probabilities, generate_greedy, render_prompts
    from routing_gym_agents.controller.model import load_model, routing_model
    from routing_gym_agents.controller.prompt import ModelLegend
    from routing_gym_agents.controller.trainer import lora_config, sft_records

    t = resolve_tournament(args.tournament)
    train = t.split_rows("train")
    rows = np.random.default_rng(0).choice(train, size=64, replace=False)
    config = ControllerConfig()
    model, tokenizer = load_model(config.model)
    targets = oracle_targets(t, Reward("gated_rank", {"lambda_e": 0.5}), rows=rows)
    legend = ModelLegend.from_tournament(t)
    peft_model = get_peft_model(model, lora_config(config.lora, model))
    plain = load_model(config.model)[0].eval()
    out: dict[str, Any] = {"tournament": t.card.name, "models": t.n_models, "sft_batch": args.batch, "layouts": {}}
    for name, settings in LAYOUTS.items():
        prompt = config.prompt
        prompt.show_legend, prompt.max_question_chars = settings["show_legend"], settings["max_question_chars"]
        builder = prompt.builder(legend)
        records = sft_records(builder, t, rows, targets, chat=True)
        texts = [
            tokenizer.apply_chat_template(r["prompt"] + r["completion"], tokenize=False) for r in records
        ]
        lengths = [len(tokenizer(x)["input_ids"]) for x in texts]
        prompt_lengths = [len(tokenizer(x)["input_ids"]) for x in render_prompts(tokenizer, [r["prompt"] for r in records], True)]
        system_tokens = len(tokenizer(builder.system())["input_ids"])
        enc = tokenizer(texts[: args.batch], return_tensors="pt", padding=True)
        labels = enc["input_ids"].clone()
        labels[enc["attention_mask"] == 0] = -100
        peft_model.train()

        def forward() -> Any:
            return peft_model(**enc, labels=labels).loss

        def forward_backward() -> None:
            peft_model.zero_grad()
            forward().backward()

        fwd = timed(lambda: forward().detach(), args.repeats)
        fwd_bwd = timed(forward_backward, args.repeats)
        peft_model.eval()
        prompts = [r["prompt"] for r in records]
        sample_ids = tokenizer(render_prompts(tokenizer, prompts[:2], True), return_tensors="pt", padding=True)

        def sample() -> None:  # one GRPO step's completions: 2 prompts x 4 samples, <= 8 tokens
            with torch.no_grad():
                peft_model.generate(**sample_ids, do_sample=True, max_new_tokens=8, num_return_sequences=4,
                                    pad_token_id=tokenizer.pad_token_id)

        # Routing runs a trained controller, whose LoRA is merged: a plain model of the same shape.
        n_route = 16
        greedy = timed(lambda: generate_greedy(plain, tokenizer, prompts[:n_route], True, 8, 16), args.repeats)
        probs = timed(lambda: choice_probabilities(plain, tokenizer, builder, prompts[:n_route], True, 16), args.repeats)
        bf16_model = routing_model(plain, "bfloat16")
        exact = choice_probabilities(plain, tokenizer, builder, prompts[:n_route], True, 16)
        probs_bf16 = timed(lambda: choice_probabilities(bf16_model, tokenizer, builder, prompts[:n_route], True, 16),
                           args.repeats)
        bf16 = choice_probabilities(bf16_model, tokenizer, builder, prompts[:n_route], True, 16)
        del bf16_model
        out["layouts"][name] = {
            **settings,
            "system_prompt_tokens": system_tokens,
            "sft_sequence_tokens_mean": round(float(np.mean(lengths)), 1),
            "sft_sequence_tokens_max": int(max(lengths)),
            "prompt_tokens_mean": round(float(np.mean(prompt_lengths)), 1),
            "sft_microbatch_forward": fwd,
            "sft_microbatch_forward_backward": fwd_bwd,
            "grpo_sampling_2x4": timed(sample, args.repeats),
            "route_greedy_16_queries": greedy,
            "route_choice_forward_16_queries": probs,
            "route_choice_forward_bf16_16_queries": probs_bf16,
            "bf16_max_abs_probability_difference": float(np.abs(bf16 - exact).max()),
            "bf16_same_letter_share": float((bf16.argmax(axis=1) == exact.argmax(axis=1)).mean()),
        }
        print(name, json.dumps(out["layouts"][name]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "profile.json").write_text(json.dumps(out, indent=2) + "\n")
    write_readme(args.out, TITLE, readme_about(out))
    return 0


TITLE = "Where a text-controller training step spends its time"


def readme_about(out: dict[str, Any]) -> str:
    lines = [
        f"Tournament `{out['tournament']}`, {out['models']} models, SFT micro-batch {out['sft_batch']}, "
        "SmolLM2-135M-Instruct with LoRA on the top 8 layers, one torch thread, a 2-core machine: wall seconds "
        "depend on its load, so the table shows this process's CPU seconds; wall seconds are in `profile.json`. "
        "Medians of repeated calls (routing: calls of 16 queries, in float32 and in the bfloat16 copy "
        "`eval.dtype=\"bfloat16\"` or `\"auto\"` routes with). Derived: the backward share is "
        "1 - forward / (forward + backward) CPU seconds.",
        "",
        "| prompt layout | system tokens | prompt tokens | SFT sequence tokens (mean / max) | SFT forward CPU s | "
        "SFT forward+backward CPU s | backward share (derived) | GRPO sampling 2x4 CPU s | route 16: greedy CPU s | "
        "route 16: one forward CPU s | route 16: one forward, bf16 CPU s | bf16: largest probability difference / "
        "same letter |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in out["layouts"].items():
        fwd, both = r["sft_microbatch_forward"]["cpu_s"], r["sft_microbatch_forward_backward"]["cpu_s"]
        lines.append(
            f"| {name} | {r['system_prompt_tokens']} | {r['prompt_tokens_mean']} | {r['sft_sequence_tokens_mean']} / "
            f"{r['sft_sequence_tokens_max']} | {fwd} | {both} | {1 - fwd / both:.2f} | {r['grpo_sampling_2x4']['cpu_s']} | "
            f"{r['route_greedy_16_queries']['cpu_s']} | {r['route_choice_forward_16_queries']['cpu_s']} | "
            f"{r['route_choice_forward_bf16_16_queries']['cpu_s']} | {r['bf16_max_abs_probability_difference']:.4f} / "
            f"{r['bf16_same_letter_share']:.2f} |"
        )
    lines += ["", "Raw numbers: `profile.json`."]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
