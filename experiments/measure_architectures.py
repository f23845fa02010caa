"""Measure batch-1 energy of the pools' architectures at the token counts of a real tournament.

    # on a GPU (bf16, NVML energy counter, idle baseline subtracted):
    python experiments/measure_architectures.py --tournament zeroeval-math --pairs 48 \
        --out experiments/results/energy_models/h100
    # on CPU, end to end with tiny configs and a replayed power trace (energies SYNTHETIC):
    python experiments/measure_architectures.py --tournament zeroeval-math --tiny --meter replay --pairs 6 --out /tmp/cal

No weights are downloaded: energy at fixed token counts depends on the architecture and the
token counts, not on the weights, so each architecture is a random-init model built from a
hand-written config (:data:`ARCH_CONFIGS`, extend it to add one). For a seeded sample of
(query, model) pairs of the tournament whose model has a configured architecture
(``routing_gym.sources.energy_model.ARCHITECTURE_OF``), the model prefills random token ids of
the pair's real prompt length and then decodes exactly the logged output length (greedy, KV
cache, batch 1, one request at a time; no end-of-sequence stop), metered with the collector's
meters (``routing_gym.collect.meters``: NVML energy counter on a GPU, the replay meter on CPU)
and the idle baseline measured once per model after a warm-up call.

Writes ``calibration.csv`` (architecture, config, params_b = the architecture's published size,
run_params_b = the model actually run (smaller with ``--tiny``), query_id, model_id,
prompt_tokens, output_tokens, seconds, joules = idle-subtracted, gross_joules, idle_w, meter,
device, dtype)
and ``energy_law.json``, the per-architecture law of ``routing_gym.sources.energy_model.fit_energy_law``
that ``routing-gym data build ... --energy-model measured-arch:calibration.csv`` applies.

Limits: HF transformers' eager decoding loop launches every kernel from Python, so batch-1
seconds (and idle-subtracted joules) sit above a CUDA-graph server's (vLLM, llama.cpp);
random weights give the same FLOPs and bytes as trained ones but not necessarily the same bit
activity, which moves power by a few percent at most.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

# model_type and config of each architecture, from the models' published config.json files;
# params_b is the published parameter count (billions), checked against the built model in tests.
ARCH_CONFIGS: dict[str, tuple[str, float, dict[str, Any]]] = {
    "qwen2.5-0.5b": ("qwen2", 0.494, dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                                          num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                                          tie_word_embeddings=True, rope_theta=1e6, max_position_embeddings=32768)),
    "qwen2.5-1.5b": ("qwen2", 1.54, dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                                         num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
                                         tie_word_embeddings=True, rope_theta=1e6, max_position_embeddings=32768)),
    "qwen2.5-3b": ("qwen2", 3.09, dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                                       num_attention_heads=16, num_key_value_heads=2, vocab_size=151936,
                                       tie_word_embeddings=True, rope_theta=1e6, max_position_embeddings=32768)),
    "qwen2.5-7b": ("qwen2", 7.62, dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                                       num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
                                       tie_word_embeddings=False, rope_theta=1e6, max_position_embeddings=32768)),
    "llama-3.1-8b": ("llama", 8.03, dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                         num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                                         tie_word_embeddings=False, rope_theta=500000.0, max_position_embeddings=131072,
                                         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})),
    "gemma-2-2b": ("gemma2", 2.61, dict(hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                                        num_attention_heads=8, num_key_value_heads=4, head_dim=256, vocab_size=256000,
                                        query_pre_attn_scalar=256, sliding_window=4096, max_position_embeddings=8192)),
    "gemma-2-9b": ("gemma2", 9.24, dict(hidden_size=3584, intermediate_size=14336, num_hidden_layers=42,
                                        num_attention_heads=16, num_key_value_heads=8, head_dim=256, vocab_size=256000,
                                        query_pre_attn_scalar=256, sliding_window=4096, max_position_embeddings=8192)),
    "gemma-2-27b": ("gemma2", 27.2, dict(hidden_size=4608, intermediate_size=36864, num_hidden_layers=46,
                                         num_attention_heads=32, num_key_value_heads=16, head_dim=128, vocab_size=256000,
                                         query_pre_attn_scalar=144, sliding_window=4096, max_position_embeddings=8192)),
    "phi-3-mini": ("phi3", 3.82, dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
                                      num_attention_heads=32, num_key_value_heads=32, vocab_size=32064,
                                      tie_word_embeddings=False, max_position_embeddings=4096)),
}
# The tiny stand-ins keep each architecture's code path (model type, GQA ratio, Gemma-2's
# soft-capping and sliding window) at a size that runs in milliseconds on a CPU.
TINY_SIZES = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, vocab_size=512, max_position_embeddings=8192)


def build_config(arch: str, tiny: bool = False):
    """A transformers config for ``arch`` (``tiny``: a few small layers of the same model type)."""
    from transformers import AutoConfig

    if arch not in ARCH_CONFIGS:
        raise SystemExit(f"--architectures: unknown architecture {arch!r}; configured: {', '.join(ARCH_CONFIGS)}")
    model_type, _, kwargs = ARCH_CONFIGS[arch]
    kwargs = dict(kwargs)
    if tiny:
        heads, kv = kwargs["num_attention_heads"], kwargs["num_key_value_heads"]
        kwargs.update(TINY_SIZES, num_attention_heads=4, num_key_value_heads=max(1, 4 * kv // heads), head_dim=16)
        kwargs.pop("rope_scaling", None)
        kwargs.update(pad_token_id=0, bos_token_id=1, eos_token_id=2)  # inside the tiny vocabulary
        if model_type == "gemma2":
            kwargs["query_pre_attn_scalar"] = 16
    else:
        kwargs.setdefault("head_dim", kwargs["hidden_size"] // kwargs["num_attention_heads"])
    return AutoConfig.for_model(model_type, **kwargs)


def build_model(arch: str, tiny: bool, device: str, dtype: str):
    """Random-init causal LM of ``arch`` on ``device`` in ``dtype`` (seeded: the same weights each run)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    config = build_config(arch, tiny)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    return model.eval()


@dataclass
class Pair:
    query_id: str
    model_id: str
    architecture: str
    prompt_tokens: int
    output_tokens: int


def sample_pairs(tournament, n: int, seed: int, architectures: list[str] | None = None,
                 max_output_tokens: int | None = None) -> tuple[list[Pair], int]:
    """``n`` seeded (query, model) pairs whose model has a configured architecture; also how many
    pairs ``max_output_tokens`` skipped."""
    from routing_gym.sources.energy_model import ARCHITECTURE_OF

    hf_ids = [s.get("hf_id") for s in tournament.models["serving"]]
    columns = [k for k, hf in enumerate(hf_ids) if ARCHITECTURE_OF.get(hf) in ARCH_CONFIGS
               and (architectures is None or ARCHITECTURE_OF[hf] in architectures)]
    if not columns:
        raise SystemExit(f"{tournament.card.name}: no model with a configured architecture "
                         f"(models: {tournament.model_ids}; architectures: {architectures or list(ARCH_CONFIGS)})")
    query_ids = tournament.query_ids
    cells = [(i, k) for i in range(tournament.n_queries) for k in columns]
    order = np.random.default_rng(seed).permutation(len(cells))
    pairs, skipped = [], 0
    for idx in order:
        i, k = cells[idx]
        out = int(tournament.output_tokens[i, k])
        if max_output_tokens is not None and out > max_output_tokens:
            skipped += 1
            continue
        pairs.append(Pair(str(query_ids[i]), tournament.model_ids[k], ARCHITECTURE_OF[hf_ids[k]],
                          int(tournament.input_tokens[i, k]), out))
        if len(pairs) == n:
            break
    return pairs, skipped


def run_request(model, prompt_tokens: int, output_tokens: int, generator) -> None:
    """Prefill ``prompt_tokens`` random ids, then decode exactly ``output_tokens`` tokens greedily
    (the prefill yields the first one), reusing the KV cache."""
    import torch

    vocab = model.config.vocab_size
    ids = torch.randint(vocab, (1, max(prompt_tokens, 1)), generator=generator).to(model.device)
    with torch.inference_mode():
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        for _ in range(output_tokens - 1):
            out = model(input_ids=out.logits[:, -1:].argmax(-1), cache=out.cache, use_cache=True)


def _synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(pairs: list[Pair], meter, *, tiny: bool, device: str, dtype: str, idle_s: float,
            log=print) -> pd.DataFrame:
    """Meter every pair, one request at a time; one model in memory at a time."""
    import torch

    from routing_gym.collect.meters import energy_reading

    rows = []
    for arch in dict.fromkeys(p.architecture for p in pairs):
        model = build_model(arch, tiny, device, dtype)
        run_params_b = sum(p.numel() for p in model.parameters()) / 1e9
        generator = torch.Generator().manual_seed(0)
        run_request(model, 16, 4, generator)  # warm-up: kernels, allocator; not metered
        _synchronize(device)
        idle_w, _ = meter.idle_power(idle_s)
        log(f"{arch}: {run_params_b:.4g} B parameters, idle {idle_w} W")
        for pair in (p for p in pairs if p.architecture == arch):
            _synchronize(device)
            meter.start()
            run_request(model, pair.prompt_tokens, pair.output_tokens, generator)
            _synchronize(device)
            reading = energy_reading(meter.kind, meter.stop(), idle_w)
            if not reading.measured:
                raise SystemExit(f"meter {meter.kind} measured nothing ({reading.note}); use --meter replay without a GPU")
            rows.append({"architecture": arch, "config": "tiny" if tiny else "full", "params_b": ARCH_CONFIGS[arch][1],
                         "run_params_b": run_params_b,
                         "query_id": pair.query_id, "model_id": pair.model_id, "prompt_tokens": pair.prompt_tokens,
                         "output_tokens": pair.output_tokens, "seconds": reading.latency_s, "joules": reading.net_j,
                         "gross_joules": reading.gross_j, "idle_w": idle_w, "meter": meter.kind,
                         "device": _device_name(device), "dtype": dtype})
            log(f"  {pair.model_id} {pair.query_id}: {pair.prompt_tokens} + {pair.output_tokens} tokens, "
                f"{reading.latency_s:.2f} s, {reading.net_j:.1f} J net")
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return pd.DataFrame(rows)


def _device_name(device: str) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tournament", default="zeroeval-math", help="real tournament (name or directory)")
    parser.add_argument("--pairs", type=int, default=48, help="(query, model) pairs to measure")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--architectures", nargs="+", default=None, help=f"subset of {', '.join(ARCH_CONFIGS)}")
    parser.add_argument("--max-output-tokens", type=int, default=None,
                        help="skip pairs with longer logged outputs (the count is printed); default: none skipped")
    parser.add_argument("--tiny", action="store_true", help="tiny configs of the same architectures (CPU pipeline check)")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda[:N]")
    parser.add_argument("--dtype", default=None, help="default bfloat16 on a GPU, float32 on CPU")
    parser.add_argument("--meter", default="auto", help="auto | nvml-counter | nvml-poll | replay")
    parser.add_argument("--trace", default="", help="replay meter: power trace CSV/JSON (default: a synthetic one)")
    parser.add_argument("--idle-s", type=float, default=5.0, help="idle baseline window per model")
    parser.add_argument("--out", required=True, help="directory for calibration.csv and energy_law.json")
    args = parser.parse_args(argv)

    import torch

    from routing_gym.collect.meters import make_meter
    from routing_gym.sources import resolve_tournament
    from routing_gym.sources.energy_model import fit_energy_law

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    dtype = args.dtype or ("bfloat16" if device.startswith("cuda") else "float32")
    tournament = resolve_tournament(args.tournament)
    pairs, skipped = sample_pairs(tournament, args.pairs, args.seed, args.architectures, args.max_output_tokens)
    print(f"{len(pairs)} pairs from {tournament.card.name} ({skipped} skipped above --max-output-tokens); "
          f"{device}, {dtype}, {'tiny' if args.tiny else 'full'} configs", file=sys.stderr)
    start = time.monotonic()
    with make_meter(args.meter, trace=args.trace, devices=[torch.cuda.current_device()] if device.startswith("cuda") else None) as meter:
        table = measure(pairs, meter, tiny=args.tiny, device=device, dtype=dtype, idle_s=args.idle_s,
                        log=lambda m: print(m, file=sys.stderr))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "calibration.csv", index=False)
    laws = fit_energy_law(table)
    (out / "energy_law.json").write_text(json.dumps({
        "source": f"experiments/measure_architectures.py --tournament {args.tournament} --pairs {args.pairs} "
                  f"--seed {args.seed}{' --tiny' if args.tiny else ''}",
        "meter": meter.kind, "device": _device_name(device), "dtype": dtype, "seconds_total": time.monotonic() - start,
        "law": "J = joules_per_input_token x prompt + joules_per_output_token x output (idle-subtracted), per architecture",
        "architectures": {a: law.to_dict() for a, law in laws.items()},
    }, indent=1), encoding="utf-8")
    print(pd.DataFrame([law.to_dict() for law in laws.values()]).to_string(index=False))
    print(f"wrote {out / 'calibration.csv'} ({len(table)} calls) and {out / 'energy_law.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
