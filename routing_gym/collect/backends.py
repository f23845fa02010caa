"""Where answers come from: Ollama, any OpenAI-compatible server, or transformers in process.

A backend turns (model, messages) into a :class:`Generation` and maps every way a call can
fail onto the collector's error classes (``routing_gym.collect.errors``), so the runner can
decide between retrying, skipping a model and stopping the run:

=========================================  ===========================
failure                                     error
=========================================  ===========================
connection refused / server gone            ``ServerUnreachable``
timeout, 5xx, 429, dropped connection       ``TransientBackendError``
unparsable or incomplete response           ``MalformedResponse``
model not pulled / not served (404)         ``ModelUnavailable``
other 4xx (bad request)                     ``BackendError``
=========================================  ===========================

Client libraries (``ollama``, ``httpx``, ``torch``, ``transformers``) are imported lazily.
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any

from routing_gym.collect.config import CollectConfig, GenerationConfig, ModelSpec
from routing_gym.collect.errors import (
    BackendError,
    MalformedResponse,
    ModelUnavailable,
    ServerUnreachable,
    TransientBackendError,
)

Messages = list[dict[str, str]]


@dataclass
class Generation:
    """One answer and what the server said about it."""

    text: str
    input_tokens: int | None
    output_tokens: int | None
    done_reason: str | None
    thinking: str | None = None
    server: dict[str, Any] = field(default_factory=dict)  # durations (s) and other server facts

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Backend(ABC):
    """Serves the models of one kind (and one host)."""

    kind: str = ""

    def __init__(self, generation: GenerationConfig) -> None:
        self.generation = generation

    @abstractmethod
    def check(self, model: ModelSpec) -> dict[str, Any]:
        """Confirm the model is servable before anything is measured; return its serving
        details (digest, quantization, ...). Raises ``ModelUnavailable``/``ServerUnreachable``."""

    @abstractmethod
    def generate(self, model: ModelSpec, messages: Messages) -> Generation: ...

    def warmup(self, model: ModelSpec, prompt: str, calls: int) -> None:
        """Load the model and run ``calls`` unmeasured generations."""
        for _ in range(calls):
            self.generate(model, [{"role": "user", "content": prompt}])

    def close(self) -> None:
        pass

    def options(self, model: ModelSpec) -> dict[str, Any]:
        g = self.generation
        opts: dict[str, Any] = {"temperature": g.temperature, "seed": g.seed, "num_predict": g.num_predict, "num_ctx": g.num_ctx}
        opts.update(model.options)
        return opts


# ---------------------------------------------------------------------- Ollama
def _ollama_tag(name: str) -> str:
    """Ollama lists ``llama3`` as ``llama3:latest``."""
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


class OllamaBackend(Backend):
    """Ollama's native API through the ``ollama`` client (``/api/chat`` or ``/api/generate``)."""

    kind = "ollama"

    def __init__(self, host: str, generation: GenerationConfig, timeout_s: float = 600.0, connections: int | None = None) -> None:
        super().__init__(generation)
        try:
            import ollama
        except ModuleNotFoundError as exc:
            raise BackendError("the Ollama backend needs the ollama package: pip install 'routing-gym[collect]'") from exc
        self.host = host
        self.timeout_s = timeout_s
        self._ollama = ollama
        kwargs = {}
        if connections:  # httpx pools 100 connections by default: more requests in flight would queue here
            import httpx

            kwargs["limits"] = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self.client = ollama.Client(host=host, timeout=timeout_s, **kwargs)
        self._tags: dict[str, dict[str, Any]] | None = None

    def _call(self, what: str, fn, *args, **kwargs):
        """Run a client call, mapping its failures onto the collector's error classes."""
        import httpx
        import pydantic

        try:
            return fn(*args, **kwargs)
        except self._ollama.ResponseError as exc:
            status, message = exc.status_code, str(exc.error)
            if status == 404 or "not found" in message.lower():
                raise ModelUnavailable(f"{what}: {message} (HTTP {status}); pull it with `ollama pull`") from None
            if status in (408, 429) or status >= 500:
                raise TransientBackendError(f"{what}: server error HTTP {status}: {message[:300]}") from None
            raise BackendError(f"{what}: request rejected, HTTP {status}: {message[:300]}") from None
        except ConnectionError as exc:  # the client turns httpx.ConnectError into this
            raise ServerUnreachable(f"{what}: no Ollama server answers at {self.host} ({exc})") from None
        except httpx.TimeoutException as exc:
            raise TransientBackendError(f"{what}: no answer within {self.timeout_s:g} s ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise TransientBackendError(f"{what}: connection to {self.host} broke ({type(exc).__name__}: {exc})") from None
        except (json.JSONDecodeError, pydantic.ValidationError, TypeError, KeyError) as exc:
            raise MalformedResponse(f"{what}: malformed response from {self.host} ({type(exc).__name__}: {str(exc)[:200]})") from None

    def _list(self) -> dict[str, dict[str, Any]]:
        listing = self._call("GET /api/tags", self.client.list)
        tags = {}
        for m in listing.models:
            if m.model:
                details = m.details.model_dump() if m.details is not None else {}
                tags[m.model] = {"digest": m.digest, "size": int(m.size) if m.size is not None else None, "details": details}
        return tags

    def check(self, model: ModelSpec) -> dict[str, Any]:
        if self._tags is None:
            self._tags = self._list()
        tag = _ollama_tag(model.served_name)
        if tag not in self._tags:
            pulled = ", ".join(sorted(self._tags)) or "none"
            raise ModelUnavailable(
                f"model {model.served_name!r} (for {model.id!r}) is not pulled on {self.host}; "
                f"run `ollama pull {model.served_name}` (pulled: {pulled})"
            )
        info = self._tags[tag]
        details = info["details"] or {}
        return {
            "backend": self.kind,
            "host": self.host,
            "name": model.served_name,
            "digest": info["digest"],
            "size_bytes": info["size"],
            "format": details.get("format"),
            "quantization": details.get("quantization_level"),
            "parameter_size": details.get("parameter_size"),
            "api": self.generation.api,
            "options": self.options(model),
            "keep_alive": self.generation.keep_alive,
        }

    def warmup(self, model: ModelSpec, prompt: str, calls: int) -> None:
        # An empty generate request loads the model and keeps it resident for keep_alive.
        self._call(f"load {model.served_name}", self.client.generate, model=model.served_name, prompt="", keep_alive=self.generation.keep_alive)
        super().warmup(model, prompt, calls)

    def generate(self, model: ModelSpec, messages: Messages) -> Generation:
        what = f"{self.generation.api} {model.served_name}"
        common = {"model": model.served_name, "options": self.options(model), "keep_alive": self.generation.keep_alive}
        if model.think is not None:
            common["think"] = model.think
        if self.generation.api == "chat":
            response = self._call(what, self.client.chat, messages=messages, **common)
            message = getattr(response, "message", None)
            text = getattr(message, "content", None)
            thinking = getattr(message, "thinking", None)
        else:
            system = "\n".join(m["content"] for m in messages if m["role"] == "system") or None
            prompt = "\n\n".join(m["content"] for m in messages if m["role"] != "system")
            response = self._call(what, self.client.generate, prompt=prompt, system=system, **common)
            text = getattr(response, "response", None)
            thinking = getattr(response, "thinking", None)
        if response.done is not True or not isinstance(text, str):
            raise MalformedResponse(f"{what}: incomplete response (done={response.done!r}, content {type(text).__name__})")
        ns = 1e-9
        server = {
            "total_duration_s": _scale(response.total_duration, ns),
            "load_duration_s": _scale(response.load_duration, ns),
            "prompt_eval_duration_s": _scale(response.prompt_eval_duration, ns),
            "eval_duration_s": _scale(response.eval_duration, ns),
            "model": response.model,
        }
        return Generation(
            text=text,
            input_tokens=response.prompt_eval_count,
            output_tokens=response.eval_count,
            done_reason=response.done_reason,
            thinking=thinking or None,
            server=server,
        )

    def close(self) -> None:
        self.client.close()


def _scale(value: int | None, factor: float) -> float | None:
    return None if value is None else value * factor


# ---------------------------------------------------------------------- OpenAI-compatible
class OpenAIBackend(Backend):
    """Any server with the OpenAI chat API (vLLM, llama.cpp server, SGLang, TGI, LM Studio):
    ``POST {base_url}/chat/completions`` and, to check models, ``GET {base_url}/models``."""

    kind = "openai"

    def __init__(self, base_url: str, generation: GenerationConfig, timeout_s: float = 600.0, api_key: str | None = None) -> None:
        super().__init__(generation)
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.api_key = api_key

    def _request(self, what: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode(errors="replace")
            if exc.code == 404:
                raise ModelUnavailable(f"{what}: HTTP 404 from {self.base_url}{path}: {detail}") from None
            if exc.code in (408, 429) or exc.code >= 500:
                raise TransientBackendError(f"{what}: server error HTTP {exc.code}: {detail}") from None
            raise BackendError(f"{what}: request rejected, HTTP {exc.code}: {detail}") from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (ConnectionRefusedError, FileNotFoundError)) or "refused" in str(reason).lower():
                raise ServerUnreachable(f"{what}: nothing answers at {self.base_url} ({reason})") from None
            if isinstance(reason, (socket.timeout, TimeoutError)):
                raise TransientBackendError(f"{what}: no answer within {self.timeout_s:g} s") from None
            raise TransientBackendError(f"{what}: {reason}") from None
        except (socket.timeout, TimeoutError):
            raise TransientBackendError(f"{what}: no answer within {self.timeout_s:g} s") from None
        except (ConnectionError, OSError) as exc:  # reset / remote closed mid-response
            raise TransientBackendError(f"{what}: connection broke ({type(exc).__name__}: {exc})") from None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise MalformedResponse(f"{what}: response is not JSON ({exc}): {raw[:120]!r}") from None

    def check(self, model: ModelSpec) -> dict[str, Any]:
        info = {"backend": self.kind, "host": self.base_url, "name": model.served_name, "digest": None, "options": self.options(model)}
        try:
            listing = self._request("GET /models", "GET", "/models")
        except ModelUnavailable:
            return info  # servers without a model list: the first call will tell
        ids = [m.get("id") for m in listing.get("data", []) if isinstance(m, dict)] if isinstance(listing, dict) else []
        if ids and model.served_name not in ids:
            raise ModelUnavailable(f"model {model.served_name!r} (for {model.id!r}) is not served at {self.base_url} (served: {', '.join(map(str, ids))})")
        return info

    def generate(self, model: ModelSpec, messages: Messages) -> Generation:
        what = f"chat {model.served_name}"
        g = self.generation
        body: dict[str, Any] = {
            "model": model.served_name,
            "messages": messages,
            "temperature": g.temperature,
            "seed": g.seed,
            "max_tokens": g.num_predict,
            "stream": False,
        }
        body.update({k: v for k, v in model.options.items() if k not in ("num_ctx", "num_predict")})
        payload = self._request(what, "POST", "/chat/completions", body)
        try:
            choice = payload["choices"][0]
            text = choice["message"]["content"]
            if not isinstance(text, str):
                raise TypeError(f"content is {type(text).__name__}")
            usage = payload.get("usage") or {}
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise MalformedResponse(f"{what}: response lacks choices[0].message.content ({exc})") from None
        return Generation(
            text=text,
            input_tokens=usage.get("prompt_tokens"),
            output_tokens=usage.get("completion_tokens"),
            done_reason=choice.get("finish_reason"),
            thinking=choice["message"].get("reasoning_content") or None,
            server={"model": payload.get("model"), "system_fingerprint": payload.get("system_fingerprint")},
        )


# ---------------------------------------------------------------------- transformers in process
class TransformersBackend(Backend):
    """Generates in this process with transformers: an offline model name
    (``routing_gym.offline_llm``, e.g. ``smollm2-135m-instruct``) or a local model folder."""

    kind = "transformers"

    def __init__(self, generation: GenerationConfig) -> None:
        super().__init__(generation)
        self._loaded: dict[str, tuple[Any, Any]] = {}

    def check(self, model: ModelSpec) -> dict[str, Any]:
        from routing_gym.offline_llm import OFFLINE_MODELS, offline_model_info, offline_model_path

        name = model.served_name
        if name in OFFLINE_MODELS:
            offline_model_path(name)  # fetch and convert now, outside any measurement
            info = offline_model_info(name)
            return {"backend": self.kind, "name": name, "digest": info["digest"], "quantization": info["quantization"], "source": info["source"], "options": self.options(model)}
        if not os.path.isdir(name):
            raise ModelUnavailable(f"{name!r} (for {model.id!r}) is neither an offline model ({', '.join(OFFLINE_MODELS)}) nor a model folder")
        return {"backend": self.kind, "name": os.path.abspath(name), "digest": None, "options": self.options(model)}

    def _model(self, model: ModelSpec) -> tuple[Any, Any]:
        name = model.served_name
        if name not in self._loaded:
            from routing_gym.offline_llm import OFFLINE_MODELS, load_offline_model

            if name in OFFLINE_MODELS:
                self._loaded[name] = load_offline_model(name)
            else:
                from transformers import AutoModelForCausalLM, AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(name)
                self._loaded[name] = (AutoModelForCausalLM.from_pretrained(name).eval(), tokenizer)
        return self._loaded[name]

    def generate(self, model: ModelSpec, messages: Messages) -> Generation:
        import torch

        net, tokenizer = self._model(model)
        g = self.generation
        opts = self.options(model)
        start = time.perf_counter()
        inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        n_in = int(inputs["input_ids"].shape[1])
        torch.manual_seed(g.seed)
        sample = g.temperature > 0
        kwargs: dict[str, Any] = {"max_new_tokens": int(opts["num_predict"]), "do_sample": sample, "pad_token_id": tokenizer.eos_token_id}
        if sample:
            kwargs["temperature"] = g.temperature
        else:  # silence "generation flags are not valid" warnings from the model's defaults
            kwargs.update(temperature=None, top_p=None, top_k=None)
        with torch.inference_mode():
            out = net.generate(**inputs, **kwargs)
        new = out[0, n_in:]
        n_out = int(new.shape[0])
        eos = tokenizer.eos_token_id
        stopped = n_out > 0 and eos is not None and int(new[-1]) == eos
        text = tokenizer.decode(new, skip_special_tokens=True)
        return Generation(
            text=text,
            input_tokens=n_in,
            output_tokens=n_out,
            done_reason="stop" if stopped or n_out < kwargs["max_new_tokens"] else "length",
            server={"total_duration_s": time.perf_counter() - start, "device": str(net.device)},
        )

    def close(self) -> None:
        self._loaded.clear()


def make_backends(config: CollectConfig, connections: int | None = None) -> dict[str, Backend]:
    """One backend per (kind, host) used by the config's models, keyed by model id;
    ``connections``: HTTP connections an Ollama client may hold open (the sweep's largest N)."""
    by_key: dict[tuple[str, str], Backend] = {}
    out: dict[str, Backend] = {}
    s = config.server
    for m in config.models:
        if m.backend == "ollama":
            key = ("ollama", m.host or s.ollama_host)
            if key not in by_key:
                by_key[key] = OllamaBackend(key[1], config.generation, s.timeout_s, connections)
        elif m.backend == "openai":
            key = ("openai", m.host or s.openai_base_url)
            if key not in by_key:
                api_key = os.environ.get(s.openai_api_key_env) if s.openai_api_key_env else None
                by_key[key] = OpenAIBackend(key[1], config.generation, s.timeout_s, api_key)
        else:
            key = ("transformers", "")
            if key not in by_key:
                by_key[key] = TransformersBackend(config.generation)
        out[m.id] = by_key[key]
    return out
