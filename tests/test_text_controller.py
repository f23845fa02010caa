"""Text controller: real SFT, GRPO and KL-GRPO with TRL on the offline SmolLM2-135M-Instruct.

Budgets are a handful of steps on a 4-model subset of the procedural ``paper-pool``
tournament (a short legend keeps prompts near 150 tokens). The converted model is cached by
``routing_gym.offline_llm`` (first run: download and convert, ~1-2 minutes).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("trl")
torch.set_num_threads(1)

from routing_gym.envs import Reward  # noqa: E402
from routing_gym.sources import resolve_tournament  # noqa: E402
from routing_gym.tournament import Outcomes  # noqa: E402
from routing_gym_agents import FitContext, ObservationBatch, list_agents, make_agent  # noqa: E402
from routing_gym_agents.controller.config import ControllerConfig  # noqa: E402
from routing_gym_agents.controller.prompt import INVALID, parse_choices  # noqa: E402
from routing_gym_agents.controller.trainer import (  # noqa: E402
    RoutingReward,
    checkpointed_layers,
    lm_head_labelled_only,
    lm_head_token_chunk,
    lora_config,
)
from routing_gym_agents.controller.agent import KL_GRPO_BETA, TextControllerAgent  # noqa: E402

MODELS = ["qwen2.5-0.5b", "qwen2.5-3b", "qwen2.5-7b", "deepseek-r1-distill-32b"]
# Tiny budgets: LoRA on the top layers with a high learning rate learns the format in ~10 steps.
FAST = dict(prompt_max_question_chars=80, sft_batch_size=2, sft_learning_rate=2e-3, eval_batch_size=10,
            route_max_validation_queries=16)
ALONE = dict(route_label_nested=False, route_decoding="greedy")  # routes by the controller's greedy letter
N_HELD_OUT = 20  # >= 95 % valid means at most one invalid completion


@pytest.fixture(scope="module")
def pool():
    return resolve_tournament("paper-pool").subset(models=MODELS)


@pytest.fixture(scope="module")
def ctx(pool):
    return FitContext(pool, Reward("gated_rank", {"lambda_e": 0.4}), seed=0)


@pytest.fixture(scope="module")
def held_out(pool):
    return ObservationBatch.from_tournament(pool, pool.split_rows("test")[:N_HELD_OUT])


@pytest.fixture(scope="module")
def sft_choice(ctx):
    # float32 routing: test_sft_choice_format checks the letter against greedy decoding. Oracle
    # targets: a ridge fitted on 20 rows predicts nearly one route for all of them, and GRPO from
    # a one-letter policy (test_grpo_from_the_sft_checkpoint_...) samples groups with no spread.
    agent = make_agent("sft", **FAST, **ALONE, sft_max_steps=10, sft_max_train_queries=20, eval_dtype="float32",
                       sft_targets="oracle")
    return agent, agent.fit(ctx)


@pytest.fixture(scope="module")
def sft_checkpoint(sft_choice, tmp_path_factory):
    path = tmp_path_factory.mktemp("controller") / "sft"
    sft_choice[0].save(path)
    return path


# ---------------------------------------------------------------------- no model
def test_reward_function_replays_the_chosen_models_logged_outcome(pool):
    reward = Reward("gated_rank", {"lambda_e": 0.4})
    rows = pool.split_rows("train")[:3]
    o = pool.outcomes(rows)
    matrix = reward(o).total
    fn = RoutingReward(reward, MODELS)
    logged: dict[str, list[float]] = {}
    completions = [[{"role": "assistant", "content": "Choice: B"}], "Choice: D", "no idea"]
    kwargs = {name: [list(map(float, r)) for r in getattr(o, name)] for name in Outcomes._fields}
    got = fn(
        prompts=["p"] * 3, completions=completions, **kwargs, log_metric=lambda k, v: logged.setdefault(k, []).append(v)
    )
    assert got == pytest.approx([matrix[0, 1], matrix[1, 3], reward.invalid_penalty])
    assert logged["route/valid_rate"] == [pytest.approx(2 / 3)]
    assert logged["route/share/qwen2.5-3b"] == [pytest.approx(1 / 3)]
    assert logged["route/share/qwen2.5-0.5b"] == [0.0]
    assert logged["route/entropy"] == [pytest.approx(0.5)]  # two of four models, equally: log 2 / log 4
    np.testing.assert_array_equal(fn.history[0]["actions"], [1, 3, INVALID])
    # Centering subtracts each row's mean over the K models, the invalid penalty included.
    centred = RoutingReward(reward, MODELS, centering=True)(prompts=["p"] * 3, completions=completions, **kwargs)
    assert centred == pytest.approx(np.array(got) - matrix.mean(axis=1))
    with pytest.raises(ValueError, match="correct"):
        fn(
            prompts=["p"],
            completions=["Choice: A"],
            correct=[[1.0]],
            energy_j=[[1.0]],
            latency_s=[[1.0]],
            mean_power_w=[[1.0]],
        )


def test_agents_are_registered_and_import_light():
    assert {"sft", "grpo", "kl-grpo"} <= set(list_agents())
    sft, grpo, kl = make_agent("sft"), make_agent("grpo"), make_agent("kl-grpo")
    assert (sft.stage, grpo.stage, kl.stage) == ("sft", "grpo", "grpo")
    assert grpo.config.grpo.beta == 0.0 and kl.config.grpo.beta == KL_GRPO_BETA["reward_range"]
    assert kl.config.sft.energy_coef is None  # SFT's targets maximise GRPO's reward
    assert make_agent("kl-grpo", beta=0.1).config.grpo.beta == 0.1
    assert make_agent("kl-grpo", grpo_beta_units="nats").config.grpo.beta == KL_GRPO_BETA["nats"]
    with pytest.raises(TypeError, match="unknown text-controller option"):
        make_agent("grpo", grpo_steps=3)
    with pytest.raises(RuntimeError, match="fit"):
        sft.act_batch(ObservationBatch(np.array(["q"], dtype=object), np.array([0])))
    code = (
        "import sys, routing_gym_agents.controller.agent; "
        "print(sorted({'torch', 'trl', 'transformers'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_only_groups_with_reward_spread_reach_the_loss():
    from routing_gym_agents.controller.trainer import keep_spread_groups

    # 4 groups of 2 completions; groups 0 and 2 have no spread.
    advantages = torch.tensor([0.0, 0.0, 0.5, -0.5, 0.0, 0.0, -1.0, 1.0])
    mask = torch.tensor([[1, 1, 0]] * 6 + [[1, 1, 1]] * 2)
    batch = {"advantages": advantages, "completion_mask": mask, "prompt_ids": torch.arange(16).reshape(8, 2),
             "num_items_in_batch": mask.sum()}
    kept = keep_spread_groups(batch, group_size=2, keep=2)
    np.testing.assert_array_equal(kept["advantages"].numpy(), [0.5, -0.5, -1.0, 1.0])
    np.testing.assert_array_equal(kept["prompt_ids"][:, 0].numpy(), [4, 6, 12, 14])
    assert int(kept["num_items_in_batch"]) == 2 + 2 + 3 + 3 and kept["groups_trained"] == 2
    assert keep_spread_groups(batch, group_size=2, keep=1)["groups_trained"] == 1  # the first with spread
    flat = keep_spread_groups({**batch, "advantages": torch.zeros(8)}, group_size=2, keep=2)
    assert flat["groups_trained"] == 0 and len(flat["advantages"]) == 4  # a step still runs


def test_kl_coefficient_in_units_of_the_reward_range():
    from routing_gym_agents.controller.trainer import kl_coefficient

    rewards = np.array([[0.0, 2.0, 1.0], [1.0, 1.0, 3.0]])  # ranges 2 and 2
    config = ControllerConfig.from_kwargs(grpo_beta=0.25)
    assert kl_coefficient(config.grpo, rewards) == pytest.approx(0.5)
    assert kl_coefficient(ControllerConfig.from_kwargs(grpo_beta=0.04, grpo_beta_units="nats").grpo, rewards) == 0.04


def _tiny_lora_model(top_layers: int):
    """A 4-layer random Llama with LoRA on its top layers (no download, builds in ms)."""
    from peft import get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )
    config = ControllerConfig.from_kwargs(lora_top_layers=top_layers, lora_r=4)
    base = LlamaForCausalLM(cfg)
    model = get_peft_model(base, lora_config(config.lora, base))
    for name, p in model.named_parameters():
        if "lora_B" in name:  # peft starts B at zero: give the adapters a non-trivial gradient path
            torch.nn.init.normal_(p, std=0.1)
    model.train()
    return model, config


def _loss_grads_and_saved_bytes(model, config, ids):
    """LoRA gradients, loss and bytes autograd kept for backward, with the config's checkpointing."""
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    model.zero_grad()
    with checkpointed_layers(model, config), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
    return loss.item(), grads, sum(saved)


def test_activation_checkpointing_of_the_lora_layers_keeps_gradients_and_saves_memory():
    model, config = _tiny_lora_model(top_layers=2)
    layers = model.base_model.model.model.layers
    inputs_need_grad = []
    layers[2].register_forward_pre_hook(lambda m, args: inputs_need_grad.append(args[0].requires_grad))
    ids = torch.randint(0, 64, (8, 48), generator=torch.Generator().manual_seed(1))
    plain = _loss_grads_and_saved_bytes(model, ControllerConfig.from_kwargs(config, activation_checkpointing=False), ids)
    checkpointed = _loss_grads_and_saved_bytes(model, config, ids)
    assert config.activation_checkpointing  # the default
    assert checkpointed[0] == plain[0]
    assert plain[1].keys() == checkpointed[1].keys() and len(plain[1]) == 2 * 7 * 2  # 2 layers x 7 modules x A, B
    for name, grad in plain[1].items():
        assert torch.equal(grad, checkpointed[1][name]), name
        assert grad.abs().sum() > 0, name
    # Only the checkpointed layers' inputs are kept: much less than every activation.
    assert checkpointed[2] < 0.6 * plain[2], (checkpointed[2], plain[2])
    # Nothing made the lowest LoRA layer's input require grad (backward stops there), and the
    # layers are back to normal once training is over.
    assert inputs_need_grad == [False, False]
    assert [layer.gradient_checkpointing for layer in layers] == [False] * 4
    # On only during a training forward with gradients: TRL's generation step re-enables
    # checkpointing on every layer if it finds the model checkpointing outside one.
    seen = []
    layers[3].register_forward_pre_hook(lambda m, args: seen.append([x.gradient_checkpointing for x in layers]))
    with checkpointed_layers(model, config) as n:
        assert n == 2 and not model.is_activation_checkpointing
        model(input_ids=ids[:1])
        with torch.no_grad():
            model(input_ids=ids[:1])
        assert not model.is_activation_checkpointing
    assert seen == [[False, False, True, True], [False] * 4]


def test_smaller_lm_head_tiles_keep_log_probs_and_gradients():
    from trl.kernels import chunked_logprob

    gen = torch.Generator().manual_seed(2)
    hidden = torch.randn(300, 32, generator=gen)
    weight = torch.randn(40000, 32, generator=gen) * 0.1  # > one 32768-column vocabulary tile
    targets = torch.randint(0, 40000, (300,), generator=gen)

    def log_probs_and_grad():
        h = hidden.clone().requires_grad_(True)
        logp, entropy, *_ = chunked_logprob.ChunkedLogProbFunction.apply(
            h, weight, None, targets, 1.0, 32768, None, 1.0, ("entropy",)
        )
        (logp.sum() + entropy.sum()).backward()
        return logp.detach(), entropy.detach(), h.grad

    default = log_probs_and_grad()
    with lm_head_token_chunk(64):
        assert chunked_logprob.TOKEN_CHUNK_SIZE == 64
        tiled = log_probs_and_grad()
    assert chunked_logprob.TOKEN_CHUNK_SIZE == 4096  # TRL's, restored
    for a, b in zip(default, tiled):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="lm_head_token_chunk"):
        ControllerConfig.from_kwargs(lm_head_token_chunk=0)


def test_lm_head_on_labelled_positions_only_keeps_log_probs_and_gradients(monkeypatch):
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl.trainer import utils as trl_utils

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(vocab_size=500, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=4)
    )
    trl_utils.add_fused_lm_head(model)
    input_ids = torch.randint(0, 500, (3, 40))
    labels = input_ids.clone()
    labels[:, :-4] = -100  # a completion of 4 tokens after a 36-token prompt, as in SFT
    scored_rows: list[int] = []
    apply = trl_utils._ChunkedLogProbFunction.apply

    def spy(hidden, *args):
        scored_rows.append(hidden.shape[0])
        return apply(hidden, *args)

    monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply", spy)

    def log_probs_and_grads():
        model.zero_grad()
        out = model(input_ids=input_ids, labels=labels, fused_lm_head=True)
        out.loss.backward()
        return out.log_probs.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    every_position = log_probs_and_grads()
    with lm_head_labelled_only(True):
        labelled = log_probs_and_grads()
    assert scored_rows == [3 * 39, 3 * 4]  # every shifted position, then the labelled ones
    assert trl_utils._use_triton(torch.device("cpu")) is False  # TRL's choice, restored
    assert torch.allclose(every_position[0], labelled[0], atol=1e-6)
    assert len(every_position[1]) == len(labelled[1]) > 0
    for a, b in zip(every_position[1], labelled[1]):
        assert torch.allclose(a, b, atol=1e-6)


def test_checkpoint_of_another_pool_is_refused(sft_checkpoint, toy):
    agent = make_agent("grpo", sft_checkpoint=str(sft_checkpoint))
    with pytest.raises(ValueError, match="trained on models"):
        agent.fit(FitContext(toy, Reward("gated_rank", {"lambda_e": 0.4})))


# ---------------------------------------------------------------------- SFT
def test_sft_choice_format_parses_on_held_out_queries(sft_choice, held_out):
    agent, logs = sft_choice
    assert logs["sft"]["loss"][-1] < logs["sft"]["loss"][0]
    assert set(logs["overhead"]) >= {"load_s", "sft_s", "train_s"}
    # Routing reads the choice distribution in one forward pass per query ...
    actions = agent.act_batch(held_out)
    assert actions.shape == (N_HELD_OUT,)
    valid = (actions >= 0) & (actions < len(MODELS))
    assert valid.mean() >= 0.95
    overhead = agent.overhead
    assert overhead is agent.overhead_
    for key in ("prompt_tokens", "prefill_tokens", "generated_tokens", "decode_s"):
        assert overhead[key].shape == (N_HELD_OUT,)
    assert (overhead["generated_tokens"] == 0).all() and (overhead["decode_s"] > 0).all()
    # The shared instructions are computed once; each query prefills its question and "Choice:".
    assert (overhead["prefill_tokens"] < overhead["prompt_tokens"]).all()
    assert "energy_j" not in overhead  # no energy meter on a CPU
    # ... and picks the letter greedy decoding writes.
    completions = agent.complete(held_out)
    assert all(c.startswith("Choice: ") for c, v in zip(completions, valid) if v), completions
    np.testing.assert_array_equal(parse_choices(completions, len(MODELS))[valid], actions[valid])
    assert (
        (agent.overhead["generated_tokens"] >= 4) & (agent.overhead["generated_tokens"] <= agent.config.eval_max_new_tokens)
    ).all()
    # The default prompt has no legend: no model name in it, and far fewer tokens than with one.
    prompt = agent.builder_.system()
    assert not any(m in prompt for m in MODELS)
    with_legend = ControllerConfig.from_kwargs(prompt_show_legend=True).prompt.builder(agent.builder_.legend)
    assert all(m in with_legend.system() for m in MODELS) and len(with_legend.system()) > len(prompt) + 80


def test_choice_actions_are_the_greedy_letter_or_invalid():
    from routing_gym_agents.controller.inference import choice_actions

    probs = np.array([[0.1, 0.7, 0.1], [0.3, 0.1, 0.2], [0.2, 0.2, 0.05]])
    # Row 3: "Choice:" has probability 0.45 <= 1/2, so greedy decoding need not write it.
    np.testing.assert_array_equal(choice_actions(probs), [1, 0, INVALID])


def test_paper_preset_needs_a_local_model_directory(tmp_path):
    with pytest.raises(ValueError, match="local model directory"):
        make_agent("grpo", preset="paper")
    with pytest.raises(ValueError, match="local model directory"):
        make_agent("grpo", preset="paper", model=str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="unknown text-controller preset"):
        make_agent("grpo", preset="papers")
    (tmp_path / "config.json").write_text("{}")
    agent = make_agent("kl-grpo", preset="paper", model=str(tmp_path), grpo_max_steps=1200)
    c = agent.config
    assert c.model.name_or_path == str(tmp_path) and c.model.dtype == "bfloat16"
    assert c.lora.top_layers is None and c.prompt.show_legend  # every layer, the legend shown
    assert c.sft.max_train_queries is None and c.sft.max_steps is None  # one epoch of the whole split
    assert c.sft.targets == "oracle"  # the paper's SFT targets
    assert c.grpo.max_steps == 1200 and c.grpo.beta == KL_GRPO_BETA["nats"]  # overrides on top of the preset
    assert c.sft.energy_coef == 0.5 and not c.holds_out_validation  # the paper's SFT; its controller routes alone


def test_sft_rationale_format_parses_on_held_out_queries(ctx, held_out):
    # Oracle targets: their sentences are mostly one template ("X answered correctly with the
    # fewest joules"), which 14 steps teach; predicted targets mix in "X was 0% correct at N J".
    agent = make_agent("sft", **FAST, format="rationale", sft_max_steps=14, sft_max_train_queries=28, sft_targets="oracle")
    agent.fit(ctx)
    actions = agent.act_batch(held_out)
    assert ((actions >= 0) & (actions < len(MODELS))).mean() >= 0.95, agent.completions_
    assert sum(c.startswith("Reason: ") for c in agent.completions_) >= 0.9 * N_HELD_OUT
    assert agent.overhead["generated_tokens"].mean() > 8  # a sentence, not just the choice


def test_shared_prefix_cache_matches_uncached_decoding(sft_choice, held_out):
    from routing_gym_agents.controller.inference import choice_probabilities, generate_greedy

    agent, _ = sft_choice
    batch = held_out.select(slice(0, 6))
    prompts = agent._prompts(batch)  # the SFT prompt shows no difficulty
    args = (agent.model_, agent.tokenizer_, prompts, agent.chat_)
    # Batches of 4 and 2 with questions of different lengths: padding sits after the prefix.
    cached, plain = (generate_greedy(*args, max_new_tokens=8, batch_size=4, prefix_cache=c) for c in (True, False))
    assert cached[0] == plain[0]
    assert (cached[1]["prefill_tokens"] < plain[1]["prefill_tokens"]).all()
    np.testing.assert_array_equal(cached[1]["prompt_tokens"], plain[1]["prefill_tokens"])
    probs = [
        choice_probabilities(agent.model_, agent.tokenizer_, agent.builder_, prompts, agent.chat_, 4, prefix_cache=c)
        for c in (True, False)
    ]
    np.testing.assert_allclose(probs[0], probs[1], rtol=1e-3, atol=1e-6)
    # Both equal the probabilities of one unpadded, uncached forward pass per prompt.
    from routing_gym_agents.controller.inference import choice_letter_ids, prompt_ids

    choice, letters = choice_letter_ids(agent.tokenizer_, agent.builder_)
    for row, ids in enumerate(prompt_ids(agent.tokenizer_, prompts, agent.chat_)):
        with torch.no_grad():
            logp = torch.log_softmax(agent.model_(input_ids=torch.tensor([ids + choice])).logits[0].float(), dim=-1)
        n = len(ids)
        direct = sum(float(logp[n - 1 + j, t]) for j, t in enumerate(choice)) + logp[-1, letters].numpy()
        np.testing.assert_allclose(probs[0][row], np.exp(direct), rtol=1e-3, atol=1e-6)
    # Probabilities of disjoint completions; SFT put most of the mass on "Choice: X".
    assert (probs[0].sum(axis=1) <= 1 + 1e-6).all() and (probs[0].sum(axis=1) > 0.5).all()


def test_bf16_routing_copy_keeps_the_choice_probabilities(sft_choice, held_out):
    from routing_gym_agents.controller.inference import choice_probabilities
    from routing_gym_agents.controller.model import routing_model

    agent, _ = sft_choice
    assert routing_model(agent.model_, "float32") is agent.model_
    copy = routing_model(agent.model_, "bfloat16")
    assert copy.dtype == torch.bfloat16 and agent.model_.dtype == torch.float32  # a copy: training weights stay
    prompts = agent._prompts(held_out)
    exact, bf16 = (choice_probabilities(m, agent.tokenizer_, agent.builder_, prompts, agent.chat_, 8) for m in (agent.model_, copy))
    # bf16 keeps ~3 significant digits: a few hundredths on a probability, a letter flipped only
    # between near-ties.
    np.testing.assert_allclose(bf16, exact, atol=0.05)
    assert (bf16.argmax(axis=1) == exact.argmax(axis=1)).mean() >= 0.85


def test_saved_controller_routes_like_the_original(sft_choice, sft_checkpoint, held_out, pool):
    batch = held_out.select(slice(0, 4))
    loaded = TextControllerAgent.load(sft_checkpoint)
    np.testing.assert_array_equal(loaded.act_batch(batch), sft_choice[0].act_batch(batch))


# ---------------------------------------------------------------------- GRPO
def test_grpo_from_the_sft_checkpoint_raises_training_reward(ctx, sft_checkpoint, held_out, tmp_path):
    agent = make_agent(
        "grpo",
        **FAST,
        sft_checkpoint=str(sft_checkpoint),
        grpo_max_steps=4,
        grpo_prompts_per_step=1,
        grpo_num_generations=4,
        grpo_max_train_queries=2,
        grpo_probe_queries=2,
        grpo_learning_rate=1e-3,
        report_dir=str(tmp_path),
    )
    logs = agent.fit(ctx)
    grpo = logs["grpo"]
    # Exact expected reward of the policy on the queries GRPO trained on, before and after.
    assert grpo["expected_reward_after"] > grpo["expected_reward_before"] + 0.05, grpo
    assert len(grpo["steps"]) == 4
    for step in grpo["steps"]:
        shares = [step[f"share_{m}"] for m in MODELS]
        assert sum(shares) == pytest.approx(step["valid_rate"])  # the selection mix of that step
        assert 0.0 <= step["frac_reward_zero_std"] <= 1.0
        assert 0.0 <= step["entropy"] <= 1.0 and math.isfinite(step["mean_reward"])
    assert grpo["collapse"]["n_steps"] == 32  # 4 steps x 2 prompts sampled (oversample) x 4 samples, all tracked
    assert all(0.0 <= step["groups_with_spread"] <= 1.0 for step in grpo["steps"])
    # report_dir: fit wrote the training report (step log, plots, summary) for its seed.
    report = sorted((tmp_path / "seed-0").iterdir())
    assert [p.name for p in report] == ["grpo_reward.png", "grpo_selection.png", "grpo_steps.csv", "summary.json"]
    assert all(p.stat().st_size > 0 for p in report)
    assert (agent.act_batch(held_out.select(slice(0, 4))) >= 0).all()


def test_kl_grpo_reference_is_the_sft_model(ctx, sft_checkpoint):
    agent = make_agent(
        "kl-grpo",
        **FAST,
        sft_checkpoint=str(sft_checkpoint),
        grpo_max_steps=1,
        grpo_prompts_per_step=1,
        grpo_max_train_queries=1,
        grpo_probe_queries=0,
    )
    logs = agent.fit(ctx)
    kl = logs["grpo"]["steps"][0]["kl"]
    # At the first step the policy equals its reference: KL ~ 0 only if the reference is the
    # SFT model (the base model puts almost no mass on "Choice: X", a KL of several nats).
    assert math.isfinite(kl) and 0.0 <= kl < 1e-3
    assert logs["grpo"]["reward"] == "gated_rank(lambda_e=0.4)"


def test_controllers_of_one_seed_share_one_sft_run(ctx, pool):
    from routing_gym_agents.controller import sft_memo as controller_sft_memo

    budget = dict(**FAST, sft_max_steps=4, sft_max_train_queries=8, sft_targets="sampled",
                  grpo_max_steps=1, grpo_prompts_per_step=1, grpo_max_train_queries=2, grpo_probe_queries=2)
    controller_sft_memo.SFT_MEMO.clear()
    first = make_agent("grpo", **budget)
    first_logs = first.fit(ctx)
    sft = make_agent("sft", **budget)  # same SFT settings, another stage: a copy of the remembered model
    sft_logs = sft.fit(ctx)
    shared = make_agent("grpo", **budget)
    shared_logs = shared.fit(ctx)
    assert "sft_shared" not in first_logs and sft_logs["sft_shared"] and shared_logs["sft_shared"]
    assert sft_logs["sft"]["loss"] == first_logs["sft"]["loss"]
    # GRPO from the copy draws and trains as it did after training SFT itself: the same policy.
    for key in ("expected_reward_before", "expected_reward_after", "probe_rows"):
        assert shared_logs["grpo"][key] == first_logs["grpo"][key], key
    batch = ObservationBatch.from_tournament(pool, pool.split_rows("test")[:6])
    np.testing.assert_array_equal(shared.act_batch(batch), first.act_batch(batch))
    # Another SFT setting is another run.
    other = make_agent("sft", **{**budget, "sft_target_temperature": 2.0})
    assert "sft_shared" not in other.fit(ctx)


# ---------------------------------------------------------------------- routing nested in the label
def test_label_nested_routing_is_chosen_on_validation_and_names_an_unseen_benchmark(pool, tmp_path):
    # humaneval has no training row: its queries still get their benchmark's name in the prompt.
    train, test = pool.split_rows("train"), pool.split_rows("test")
    unseen = pool.queries["benchmark"].to_numpy() == "humaneval"
    t = pool.subset(rows=np.concatenate([train[~unseen[train]][:200], test[:20], test[unseen[test]][:4]]))
    ctx = FitContext(t, Reward("gated_rank", {"lambda_e": 0.4}), seed=0)
    agent = make_agent("sft", **FAST, sft_max_steps=6, sft_max_train_queries=24)
    logs = agent.fit(ctx)
    route = logs["route"]
    assert 0 < route["validation_queries"] <= 16 and logs["validation_queries"] >= route["validation_queries"]
    assert logs["sft"]["n_queries"] == 24 and logs["sft"]["target_reward"] == "gated_rank(lambda_e=0.4)"
    # Label only (alpha 0, greedy) is always a candidate, and the chosen one is the best on validation.
    values = route["validation_value"]
    assert "label only" in values and len(values) == 1 + 2 * len(agent.config.route.alphas)
    chosen = "label only" if route["alpha"] == "label only" else f"alpha={route['alpha']:g}, {route['decoding']}"
    assert values[chosen] == max(values.values())
    assert logs["overhead"]["route_sampling"] == float(route["decoding"] == "sample")
    batch = ObservationBatch.from_tournament(t, t.split_rows("test"))
    names = [t.benchmarks[c] for c in batch.benchmarks]
    assert "humaneval" in names and "humaneval" not in set(t.queries["benchmark"][t.split_rows("train")])
    prompts = agent._prompts(batch)
    assert all(p[1]["content"].startswith(f"Benchmark: {name}\nQuestion: ") for p, name in zip(prompts, names))
    actions = agent.act_batch(batch)
    assert ((actions >= 0) & (actions < len(MODELS))).all()  # a nested route is always a model
    agent.save(tmp_path / "nested")
    loaded = TextControllerAgent.load(tmp_path / "nested")
    assert loaded.policy_.describe() == agent.policy_.describe()
    np.testing.assert_array_equal(loaded.act_batch(batch), actions)


def test_grpo_worth_less_on_validation_than_its_sft_model_routes_by_the_sft_model(ctx, pool, monkeypatch):
    from routing_gym_agents.controller import policy as controller_policy
    from routing_gym_agents.controller.config import PRESETS

    budget = dict(**FAST, sft_max_steps=4, sft_max_train_queries=8, sft_targets="sampled", grpo_max_steps=1,
                  grpo_prompts_per_step=1, grpo_max_train_queries=2, grpo_probe_queries=0, grpo_learning_rate=1e-2)
    agent = make_agent("grpo", **budget)
    logs = agent.fit(ctx)
    route = logs["route"]
    grpo_best, sft_best = max(route["validation_value_grpo"].values()), max(route["validation_value_sft"].values())
    assert route["grpo_kept"] == (grpo_best >= sft_best)
    assert route["validation_value"] == route["validation_value_grpo" if route["grpo_kept"] else "validation_value_sft"]
    assert logs["overhead"]["route_grpo_kept"] == float(route["grpo_kept"])
    # Forced to give way, the GRPO agent routes exactly as the SFT agent of the same settings
    # (the same SFT run, shared), though GRPO moved its own model's validation values.
    monkeypatch.setattr(controller_policy, "keep_grpo", lambda grpo_values, sft_values: False)
    fallen = make_agent("grpo", **budget)
    fallen_route = fallen.fit(ctx)["route"]
    assert fallen_route["validation_value_grpo"] != fallen_route["validation_value_sft"]
    sft = make_agent("sft", **budget)
    sft_route = sft.fit(ctx)["route"]
    assert "grpo_kept" not in sft_route and fallen_route["grpo_kept"] is False
    assert fallen_route["validation_value"] == sft_route["validation_value"] == fallen_route["validation_value_sft"]
    batch = ObservationBatch.from_tournament(pool, pool.split_rows("test")[:8])
    np.testing.assert_array_equal(fallen.act_batch(batch), sft.act_batch(batch))
    # Switched off (and in the paper preset, which deploys its GRPO model) nothing is compared.
    off = make_agent("grpo", **budget, grpo_keep_sft_if_better=False).fit(ctx)["route"]
    assert "grpo_kept" not in off and off["validation_value"] == route["validation_value_grpo"]
    assert PRESETS["paper"]["grpo_keep_sft_if_better"] is False
