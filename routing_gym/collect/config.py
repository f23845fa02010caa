"""The collection config: which models answer which questions, how, and how energy is read.

A config file is YAML (needs PyYAML), JSON or TOML; its keys mirror these dataclasses and every
unknown key or wrong type is an error that names the file and the field, e.g.
``run.yaml: models[2].params_b: expected a number, got 'seven'``. A minimal file::

    name: my-pool
    seed: 0
    benchmarks:
      - {name: gsm8k, n: 100}
      - {name: mmlu, n: 100}
    models:
      - {id: qwen2.5-1.5b, name: "qwen2.5:1.5b-instruct", family: qwen2.5, params_b: 1.5}
      - {id: llama3.1-8b, name: "llama3.1:8b", family: llama3.1, params_b: 8.0}

See ``docs/collecting.md`` for every field and ``experiments/collect_example.yaml``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from routing_gym.collect.errors import ConfigError
from routing_gym.configfile import read_config_file

BACKENDS = ("ollama", "openai", "transformers")
METERS = ("auto", "nvml-counter", "nvml-poll", "replay", "none")


@dataclass
class ModelSpec:
    """One answer model of the pool."""

    id: str  # model_id in the tournament
    backend: str = "ollama"  # ollama | openai | transformers
    name: str = ""  # name on the server (Ollama tag, OpenAI model, offline model or path); default: id
    family: str = ""
    params_b: float | None = None  # billions of parameters
    reasoning: bool = False  # a thinking model
    think: bool | None = None  # Ollama's ``think`` flag; None leaves the server default
    host: str = ""  # overrides the backend's host / base URL for this model
    options: dict[str, Any] = field(default_factory=dict)  # extra generation options for this model

    @property
    def served_name(self) -> str:
        return self.name or self.id


@dataclass
class BenchmarkSpec:
    """A question set and how many questions to sample from it."""

    name: str  # benchmark id (registered question set, or any label when ``path`` is given)
    n: int | None = None  # sample size; None = every question
    path: str = ""  # a JSONL file of own questions (query_id, prompt, reference[, metadata])
    grader: str = ""  # registered grader name; default: the benchmark's name
    system_prompt: str | None = None  # overrides generation.system_prompt for this set


@dataclass
class GenerationConfig:
    """Decoding settings, the same for every model (deterministic by default)."""

    temperature: float = 0.0
    seed: int = 0
    num_predict: int = 512  # maximum new tokens
    num_ctx: int = 4096  # context window (Ollama)
    keep_alive: str | float = "30m"  # Ollama keeps the model resident: a duration, or seconds (-1: forever)
    api: str = "chat"  # Ollama endpoint: chat | generate
    system_prompt: str | None = None


@dataclass
class ServerConfig:
    """Where the backends are."""

    ollama_host: str = "http://127.0.0.1:11434"
    openai_base_url: str = "http://127.0.0.1:8000/v1"  # /chat/completions and /models below it
    openai_api_key_env: str = "OPENAI_API_KEY"  # environment variable holding the key, if any
    timeout_s: float = 600.0  # per call


@dataclass
class EnergyConfig:
    """How GPU energy is read (see ``routing_gym.collect.meters``)."""

    meter: str = "auto"  # auto | nvml-counter | nvml-poll | replay | none
    devices: list[int] | None = None  # GPU indices to sum; None = every visible GPU
    interval_s: float = 0.2  # polling period of nvml-poll (the paper's 200 ms)
    idle_window_s: float = 10.0  # length of each idle-baseline measurement
    idle_every_s: float = 600.0  # re-measure the idle baseline this often (and per model)
    trace: str = ""  # power trace file for meter=replay (CSV t_s,power_w or JSON); "" = built-in
    report: str = "net"  # tournament energy_j: net (idle-subtracted) | gross


@dataclass
class RetryConfig:
    """Retries of failed calls, and when to give up on the whole run."""

    max_attempts: int = 4  # per (question, model) pair, including the first
    backoff_s: float = 2.0  # first wait; doubles each retry
    backoff_max_s: float = 60.0
    stop_after_failed_pairs: int = 3  # consecutive pairs that failed every attempt -> stop run


@dataclass
class WarmupConfig:
    """Unmeasured calls before each model's first measured call."""

    calls: int = 1
    prompt: str = "Reply with one word: ready."


@dataclass
class ShardSpec:
    """One collector actor of ``collect run --ray``: a GPU host and the models it answers
    from its own local server, metering its own GPU(s)."""

    name: str
    node: str = ""  # Ray node (IP address or hostname) to run on; "" = wherever Ray places it
    models: list[str] = field(default_factory=list)  # model ids this shard answers
    num_gpus: float = 0.0  # GPUs the actor reserves on its node (0: no reservation)


@dataclass
class SweepConfig:
    """``collect sweep``: each model answers with N requests in flight at once, for each N
    (``routing_gym.collect.sweep``)."""

    concurrency: list[int] = field(default_factory=list)  # the N values, e.g. [1, 2, 4, 8]; [] = no sweep
    rounds: int = 4  # requests measured per (model, N) = max(min_requests, rounds x N)
    min_requests: int = 16
    models: list[str] = field(default_factory=list)  # model ids to sweep; [] = every model

    def requests(self, n: int) -> int:
        return max(self.min_requests, self.rounds * n)


@dataclass
class CollectConfig:
    """Everything that defines a collection run."""

    name: str
    models: list[ModelSpec]
    benchmarks: list[BenchmarkSpec]
    seed: int = 0  # question sampling and generation seed
    description: str = ""
    licence: str = "unknown"  # licence of the resulting tournament data
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    server: ServerConfig = field(default_factory=ServerConfig)
    energy: EnergyConfig = field(default_factory=EnergyConfig)
    retry: RetryConfig = field(default_factory=RetryConfig)
    warmup: WarmupConfig = field(default_factory=WarmupConfig)
    store_output_text: bool = True
    # ``collect run --ray``: one actor per shard; none = one per Ray node, models dealt round robin
    shards: list[ShardSpec] = field(default_factory=list)
    sweep: SweepConfig = field(default_factory=SweepConfig)  # `collect sweep` only
    source: str = field(default="<memory>", compare=False, repr=False)

    def __post_init__(self) -> None:
        problems = _semantic_problems(self)
        if problems:
            raise ConfigError(f"{self.source}: " + f"\n{self.source}: ".join(problems))

    def model(self, model_id: str) -> ModelSpec:
        for m in self.models:
            if m.id == model_id:
                return m
        raise KeyError(model_id)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("source")
        return data

    def work_fingerprint(self) -> dict[str, Any]:
        """The parts that decide the work units and what an answer means; a resumed run must
        match them (a different host, meter or retry policy is fine)."""
        data = self.to_dict()
        models = [{k: m[k] for k in ("id", "backend", "name", "think", "options")} for m in data["models"]]
        return {
            "seed": data["seed"],
            "benchmarks": data["benchmarks"],
            "models": models,
            "generation": data["generation"],
        }

    def fingerprint_hash(self) -> str:
        blob = json.dumps(self.work_fingerprint(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def _semantic_problems(c: CollectConfig) -> list[str]:
    problems: list[str] = []
    if not c.name.strip():
        problems.append("name: must not be empty")
    if not c.models:
        problems.append("models: at least one model is needed")
    if not c.benchmarks:
        problems.append("benchmarks: at least one benchmark is needed")
    seen: set[str] = set()
    for i, m in enumerate(c.models):
        if not m.id.strip():
            problems.append(f"models[{i}].id: must not be empty")
        if m.id in seen:
            problems.append(f"models[{i}].id: duplicate model id {m.id!r}")
        seen.add(m.id)
        if m.backend not in BACKENDS:
            problems.append(f"models[{i}].backend: {m.backend!r} is not one of {', '.join(BACKENDS)}")
        if m.params_b is not None and m.params_b <= 0:
            problems.append(f"models[{i}].params_b: must be > 0, got {m.params_b}")
    names: set[str] = set()
    for i, b in enumerate(c.benchmarks):
        if b.name in names:
            problems.append(f"benchmarks[{i}].name: duplicate benchmark {b.name!r}")
        names.add(b.name)
        if b.n is not None and b.n < 1:
            problems.append(f"benchmarks[{i}].n: must be >= 1 (or omitted for all), got {b.n}")
    if c.energy.meter not in METERS:
        problems.append(f"energy.meter: {c.energy.meter!r} is not one of {', '.join(METERS)}")
    if c.energy.report not in ("net", "gross"):
        problems.append(f"energy.report: {c.energy.report!r} is not 'net' or 'gross'")
    if c.energy.interval_s <= 0 or c.energy.idle_window_s < 0 or c.energy.idle_every_s <= 0:
        problems.append("energy: interval_s and idle_every_s must be > 0, idle_window_s >= 0")
    if c.generation.api not in ("chat", "generate"):
        problems.append(f"generation.api: {c.generation.api!r} is not 'chat' or 'generate'")
    if c.generation.num_predict < 1:
        problems.append(f"generation.num_predict: must be >= 1, got {c.generation.num_predict}")
    if c.retry.max_attempts < 1 or c.retry.stop_after_failed_pairs < 1:
        problems.append("retry: max_attempts and stop_after_failed_pairs must be >= 1")
    if c.warmup.calls < 0:
        problems.append(f"warmup.calls: must be >= 0, got {c.warmup.calls}")
    problems += _shard_problems(c)
    problems += _sweep_problems(c)
    return problems


SWEEP_BACKENDS = ("ollama", "openai")  # a sweep needs a server that can take concurrent requests


def _sweep_problems(c: CollectConfig) -> list[str]:
    s = c.sweep
    problems = [f"sweep.concurrency[{i}]: must be >= 1, got {n}" for i, n in enumerate(s.concurrency) if n < 1]
    if len(set(s.concurrency)) != len(s.concurrency):
        problems.append(f"sweep.concurrency: each N once, got {s.concurrency}")
    if s.rounds < 1:
        problems.append(f"sweep.rounds: must be >= 1, got {s.rounds}")
    if s.min_requests < 1:
        problems.append(f"sweep.min_requests: must be >= 1, got {s.min_requests}")
    models = {m.id: m for m in c.models}
    for j, model_id in enumerate(s.models):
        if model_id not in models:
            problems.append(f"sweep.models[{j}]: unknown model id {model_id!r}; models: {sorted(models)}")
        elif models[model_id].backend not in SWEEP_BACKENDS:
            problems.append(f"sweep.models[{j}]: model {model_id!r} has backend {models[model_id].backend!r}; "
                            f"a sweep needs a server ({', '.join(SWEEP_BACKENDS)})")
    return problems


def sweep_models(config: CollectConfig) -> list[ModelSpec]:
    """The models a ``collect sweep`` measures; raises :class:`ConfigError` naming the field when
    the config has no sweep or would sweep a model that is not served over HTTP."""
    where = config.source
    if not config.sweep.concurrency:
        raise ConfigError(f"{where}: sweep.concurrency: list the numbers of requests in flight to measure, "
                          "e.g. sweep: {concurrency: [1, 2, 4, 8]}")
    if config.sweep.models:
        return [config.model(m) for m in config.sweep.models]
    local = [f"models[{i}].backend: model {m.id!r} has backend {m.backend!r}"
             for i, m in enumerate(config.models) if m.backend not in SWEEP_BACKENDS]
    if local:
        raise ConfigError(f"{where}: " + "; ".join(local) + f"; a sweep needs a server ({', '.join(SWEEP_BACKENDS)}): "
                          "name the served models in sweep.models")
    return list(config.models)


def _shard_problems(c: CollectConfig) -> list[str]:
    if not c.shards:
        return []
    problems: list[str] = []
    known = {m.id for m in c.models}
    owner: dict[str, str] = {}
    names: set[str] = set()
    for i, shard in enumerate(c.shards):
        if not shard.name.strip() or shard.name in names:
            problems.append(f"shards[{i}].name: must be non-empty and unique, got {shard.name!r}")
        names.add(shard.name)
        if shard.num_gpus < 0:
            problems.append(f"shards[{i}].num_gpus: must be >= 0, got {shard.num_gpus}")
        if not shard.models:
            problems.append(f"shards[{i}].models: a shard needs at least one model id")
        for j, model in enumerate(shard.models):
            if model not in known:
                problems.append(f"shards[{i}].models[{j}]: unknown model id {model!r}; models: {sorted(known)}")
            elif model in owner:
                problems.append(f"shards[{i}].models[{j}]: model {model!r} is already answered by shard {owner[model]!r}")
            owner.setdefault(model, shard.name)
    unassigned = [m.id for m in c.models if m.id not in owner]
    if unassigned:
        problems.append(f"shards: model(s) {unassigned} are in no shard; every model needs one")
    return problems


# ---------------------------------------------------------------------- reading files
def load_config(path: str | Path) -> CollectConfig:
    """Read a YAML, JSON or TOML config file."""
    return config_from_dict(read_config_file(path, ConfigError), source=str(path))


def config_from_dict(data: Any, source: str = "<memory>") -> CollectConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the config must be a mapping, got {type(data).__name__}")
    data = dict(data)
    models = data.get("models")
    if isinstance(models, list):  # accept a bare list of Ollama tags for the shortest configs
        data["models"] = [{"id": m} if isinstance(m, str) else m for m in models]
    benchmarks = data.get("benchmarks")
    if isinstance(benchmarks, list):
        data["benchmarks"] = [{"name": b} if isinstance(b, str) else b for b in benchmarks]
    config = _build(CollectConfig, data, "", source)
    # relative question files are relative to the config file
    if source != "<memory>":
        base = Path(source).resolve().parent
        for b in config.benchmarks:
            if b.path and not Path(b.path).is_absolute():
                b.path = str(base / b.path)
        if config.energy.trace and not Path(config.energy.trace).is_absolute():
            config.energy.trace = str(base / config.energy.trace)
    return config


def _build(cls: type, data: Any, where: str, source: str) -> Any:
    label = where or "the config"
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: {label}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "source"}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{source}: {label}: unknown key(s) {unknown}; known: {sorted(fields)}")
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        key = f"{where}.{name}" if where else name
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{source}: {key}: required field is missing")
            continue
        kwargs[name] = _convert(hints[name], data[name], key, source)
    if cls is CollectConfig:
        kwargs["source"] = source
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: {label}: {exc}") from exc


def _convert(tp: Any, value: Any, key: str, source: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        errors = []
        for a in inner:
            try:
                return _convert(a, value, key, source)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0])
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, key, source)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{source}: {key}: expected a list, got {type(value).__name__}")
        (item,) = typing.get_args(tp)
        return [_convert(item, v, f"{key}[{i}]", source) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: {key}: expected a mapping, got {type(value).__name__}")
        return dict(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: {key}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{source}: {key}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{source}: {key}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{source}: {key}: expected text, got {value!r}")
        return value
    raise ConfigError(f"{source}: {key}: unsupported field type {tp}")
