"""Routing with a trained text controller: greedy decoding and the exact choice probe.

- ``generate_greedy``: batched greedy completions with a shared-prefix KV cache (the
  instructions and legend every prompt shares are computed once) and the controller's own
  cost per query (tokens, seconds, and joules when an energy meter is available);
- ``choice_probabilities`` / ``expected_choice_reward``: the exact probability of each
  ``Choice: X`` and the policy's expected reward, the noise-free probe that training logs
  after SFT and after GRPO;
- ``route_by_choice``: the choice probabilities of held-out queries from that one forward pass,
  with the same overhead arrays as ``generate_greedy`` (``controller.policy`` turns them into
  routes).

torch is imported inside functions only.
"""

from __future__ import annotations

import math
import time
from typing import Any, Sequence

import numpy as np

from routing_gym_agents.controller.prompt import INVALID, PromptBuilder


def render_prompts(tokenizer: Any, prompts: Sequence[Any], chat: bool) -> list[str]:
    if not chat:
        return list(prompts)
    return [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]


def prompt_ids(tokenizer: Any, prompts: Sequence[Any], chat: bool) -> list[list[int]]:
    return [tokenizer(t, add_special_tokens=not chat)["input_ids"] for t in render_prompts(tokenizer, prompts, chat)]


def _make_meter(kind: str, device: str) -> Any:
    """A ``routing_gym.collect.meters`` meter for controller joules; None without one.

    ``auto`` only tries NVML when the controller runs on a GPU (on CPU there is nothing to read).
    """
    if kind == "none" or (kind == "auto" and device == "cpu"):
        return None
    from routing_gym.collect.meters import NullMeter, make_meter

    meter = make_meter(kind)
    return None if isinstance(meter, NullMeter) else meter


def generate_greedy(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Any],
    chat: bool,
    max_new_tokens: int,
    batch_size: int,
    meter: str = "auto",
    progress: bool = False,
    prefix_cache: bool = True,
) -> tuple[list[str], dict[str, np.ndarray]]:
    """Greedy completions of ``prompts`` and the controller's overhead per query.

    With ``prefix_cache`` the token prefix every prompt shares (instructions and legend, most
    of the prompt) is run once and its key/value cache reused for every batch, so each query
    only pays for its own question; outputs match uncached decoding up to float round-off.

    Overhead arrays: ``prompt_tokens`` (whole prompt), ``prefill_tokens`` (prompt tokens
    actually computed for the query, after the shared prefix), ``generated_tokens`` (up to and
    including the end of turn), ``decode_s`` (the query's equal share of its batch's wall time
    plus of the one-off prefix pass) and, when an energy meter is available, ``energy_j``
    (gross GPU joules, shared the same way).
    """
    import torch
    from tqdm.auto import tqdm

    device = model.device
    ids = prompt_ids(tokenizer, prompts, chat)
    n = len(ids)
    energy = _make_meter(meter, device.type)
    overhead = {name: np.zeros(n) for name in ("prompt_tokens", "prefill_tokens", "generated_tokens", "decode_s")}
    if energy is not None:
        overhead["energy_j"] = np.zeros(n)
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    model.eval()

    prefix, shared_cache = [], None
    if prefix_cache and n > 1:  # the one-off prefix pass: its cost is shared by every query
        if energy is not None:
            energy.start()
        tic = time.perf_counter()
        prefix, shared_cache = _shared_prefix_cache(model, ids)
        overhead["decode_s"] += (time.perf_counter() - tic) / n
        if energy is not None:
            joules = energy.stop().gross_j
            overhead["energy_j"] += (joules if joules is not None else math.nan) / n
    p = len(prefix)
    out_text: list[str] = [""] * n
    batches = _length_sorted_batches([len(x) for x in ids], batch_size)
    for batch in tqdm(batches, desc="controller decode", disable=not progress, leave=False):
        suffixes = [ids[i][p:] for i in batch]
        width = max(len(x) for x in suffixes)
        # Left padding sits between the shared prefix and each question; the attention mask
        # hides it and position ids count only real tokens, as without the cache.
        input_ids = torch.tensor([prefix + [pad] * (width - len(x)) + x for x in suffixes], device=device)
        mask = torch.tensor([[1] * p + [0] * (width - len(x)) + [1] * len(x) for x in suffixes], device=device)
        kwargs = {} if shared_cache is None else {"cache": _repeat_cache(shared_cache, len(suffixes))}
        if energy is not None:
            energy.start()
        tic = time.perf_counter()
        with torch.no_grad():
            out = model.generate(
                input_ids=input_ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=pad,
                eos_token_id=eos,
                **kwargs,
            )
        seconds = time.perf_counter() - tic
        joules = energy.stop().gross_j if energy is not None else None
        generated = out[:, input_ids.shape[1] :]
        overhead["prompt_tokens"][batch] = [p + len(x) for x in suffixes]
        overhead["prefill_tokens"][batch] = [len(x) for x in suffixes]
        overhead["generated_tokens"][batch] = _lengths_until_eos(generated.cpu().numpy(), eos)
        overhead["decode_s"][batch] += seconds / len(suffixes)
        if energy is not None:
            overhead["energy_j"][batch] += (joules if joules is not None else math.nan) / len(suffixes)
        for i, text in zip(batch, tokenizer.batch_decode(generated, skip_special_tokens=True)):
            out_text[i] = text
    if energy is not None:
        energy.close()
    return out_text, overhead


def _common_prefix(ids: list[list[int]]) -> list[int]:
    """Longest token prefix shared by every sequence, leaving each at least one own token."""
    first = ids[0]
    limit = min(len(x) for x in ids) - 1
    length = 0
    while length < limit and all(x[length] == first[length] for x in ids):
        length += 1
    return first[:length]


def _shared_prefix_cache(model: Any, ids: list[list[int]]) -> tuple[list[int], Any]:
    """The token prefix all prompts share (instructions and legend) and its KV cache, computed
    once; ``([], None)`` for a single prompt or no shared prefix."""
    import torch

    prefix = _common_prefix(ids) if len(ids) > 1 else []
    if not prefix:
        return [], None
    with torch.no_grad():
        return prefix, model(input_ids=torch.tensor([prefix], device=model.device), use_cache=True).cache


def _repeat_cache(cache: Any, rows: int) -> Any:
    """A batch-sized copy of the shared prefix cache (the forward pass extends it in place)."""
    import copy

    batch = copy.deepcopy(cache)
    batch.batch_repeat_interleave(rows)
    return batch


def _length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Query indices in batches of similar length (shortest first): a batch pads to its longest
    row, so on specialist-pool's test split sorting cuts the computed tokens by a fifth."""
    order = np.argsort(np.asarray(lengths), kind="stable")
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def _lengths_until_eos(ids: np.ndarray, eos: int) -> np.ndarray:
    is_eos = ids == eos
    first = np.where(is_eos.any(axis=1), is_eos.argmax(axis=1) + 1, ids.shape[1])
    return first.astype(float)


def choice_letter_ids(tokenizer: Any, builder: PromptBuilder) -> tuple[list[int], list[int]]:
    """Token ids of the shared ``Choice:`` prefix and of each letter after it."""
    encoded = [
        tokenizer(builder.choice_line(k), add_special_tokens=False)["input_ids"] for k in range(builder.legend.k)
    ]
    prefix = encoded[0][:-1]
    if any(e[:-1] != prefix for e in encoded) or len({e[-1] for e in encoded}) != len(encoded):
        raise ValueError("this tokenizer does not split 'Choice: X' into a shared prefix and one letter token")
    return prefix, [e[-1] for e in encoded]


def choice_probabilities(
    model: Any,
    tokenizer: Any,
    builder: PromptBuilder,
    prompts: Sequence[Any],
    chat: bool,
    batch_size: int = 8,
    prefix_cache: bool = True,
) -> np.ndarray:
    """``[n, K]`` probability that the completion starts with ``Choice: X`` for each letter X
    (prefix probability times the letter's next-token probability), temperature 1.

    One forward pass per prompt; with ``prefix_cache`` the shared instructions and legend are
    computed once (as in ``generate_greedy``)."""
    import torch

    choice, letters = choice_letter_ids(tokenizer, builder)
    ids = prompt_ids(tokenizer, prompts, chat)
    model.eval()
    shared, shared_cache = _shared_prefix_cache(model, ids) if prefix_cache else ([], None)
    p, pad, device = len(shared), tokenizer.pad_token_id, model.device
    out = np.zeros((len(ids), len(letters)))
    keep = len(choice) + 1  # the positions predicting "Choice:" and the letter
    for batch in _length_sorted_batches([len(x) for x in ids], batch_size):
        # Each row: its own prompt tokens (at least one), then "Choice:"; left padding between
        # the cached prefix and the row (masked, positions counting real tokens only) makes every
        # row end at the same position, so only the last ``keep`` positions are scored.
        rows = [ids[i][p:] + choice for i in batch]
        width = max(len(x) for x in rows)
        input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in rows], device=device)
        mask = torch.tensor([[1] * p + [0] * (width - len(x)) + [1] * len(x) for x in rows], device=device)
        positions = [[p] * (width - len(x)) + list(range(p, p + len(x))) for x in rows]
        kwargs: dict[str, Any] = {"position_ids": torch.tensor(positions, device=device)}
        if shared_cache is not None:
            kwargs["cache"] = _repeat_cache(shared_cache, len(rows))
        # The LM head on the last ``keep`` positions only (``logits_to_keep``): in float32 routing
        # ran 226 -> 167 ms per query on an AVX2 CPU. Not in bf16: there transformers hands the LM
        # head a strided slice, which bf16 matrix products on CPU run ~100x slower, so bf16 takes
        # every position's logits and slices them.
        if model.dtype == torch.float32:
            kwargs["logits_to_keep"] = keep
        with torch.no_grad():
            logits = model(input_ids=input_ids, attention_mask=mask, **kwargs).logits[:, -keep:]
            logp = torch.log_softmax(logits.float(), dim=-1)
        # kept position j predicts the token after it: choice[j] for j < len(choice), then the letter
        choice_logp = sum(logp[:, j, token] for j, token in enumerate(choice))
        out[batch] = torch.exp(choice_logp[:, None] + logp[:, -1, letters]).cpu().numpy()
    return out


def choice_actions(probabilities: np.ndarray) -> np.ndarray:
    """The letter greedy decoding writes, read from ``choice_probabilities``: the most probable
    letter, or ``INVALID`` where ``Choice:`` itself has probability <= 1/2 (then greedy
    decoding need not write it; above 1/2 each of its tokens is the most probable one)."""
    actions = probabilities.argmax(axis=1)
    return np.where(probabilities.sum(axis=1) > 0.5, actions, INVALID).astype(np.int64)


def route_by_choice(
    model: Any,
    tokenizer: Any,
    builder: PromptBuilder,
    prompts: Sequence[Any],
    chat: bool,
    batch_size: int,
    meter: str = "auto",
    prefix_cache: bool = True,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``([n, K] choice_probabilities, overhead)`` of held-out queries: one forward pass per
    query instead of decoding ``Choice: X`` token by token (its ``choice_actions`` are the
    letters greedy decoding writes).

    Overhead arrays as ``generate_greedy``'s: ``prompt_tokens``, ``prefill_tokens`` (the query's
    own tokens after the shared prefix, plus the scored ``Choice:`` tokens), ``generated_tokens``
    (0: nothing is sampled), ``decode_s`` (equal share of the wall time) and ``energy_j`` with
    a meter."""
    n = len(prompts)
    energy = _make_meter(meter, model.device.type)
    if energy is not None:
        energy.start()
    tic = time.perf_counter()
    probs = choice_probabilities(model, tokenizer, builder, prompts, chat, batch_size, prefix_cache)
    seconds = time.perf_counter() - tic
    ids = prompt_ids(tokenizer, prompts, chat)
    shared = len(_common_prefix(ids)) if prefix_cache and n > 1 else 0
    choice = len(choice_letter_ids(tokenizer, builder)[0])
    overhead = {
        "prompt_tokens": np.array([len(x) for x in ids], dtype=float),
        "prefill_tokens": np.array([len(x) - shared + choice for x in ids], dtype=float),
        "generated_tokens": np.zeros(n),
        "decode_s": np.full(n, seconds / max(n, 1)),
    }
    if energy is not None:
        joules = energy.stop().gross_j
        overhead["energy_j"] = np.full(n, (joules if joules is not None else math.nan) / max(n, 1))
        energy.close()
    return probs, overhead


def expected_choice_reward(probabilities: np.ndarray, reward_matrix: np.ndarray, invalid_penalty: float) -> np.ndarray:
    """Per query, the policy's expected reward: sum_k p_k r_k, the remaining mass (completions
    not starting with ``Choice: X``) charged the invalid penalty."""
    valid_mass = probabilities.sum(axis=1)
    return (probabilities * reward_matrix).sum(axis=1) + (1.0 - valid_mass) * invalid_penalty
