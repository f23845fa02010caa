"""Fetch the files the real-data builders read from their public repositories.

``download(build, dest)`` downloads every file :data:`PINNED_SHA256` lists for a build
(``zeroeval-math`` or ``llmrouter``) from the pinned commits of the data README:

======================================  ==============================  =========================
data directory path                     repository @ commit             repository path
======================================  ==============================  =========================
``outcomes/zeroeval/...``               WildEval/ZeroEval @ 8c1485ed    ``result_dirs/...`` (.json)
``outcomes/llmrouter/...``              ulab-uiuc/LLMRouter @ 4e7a7969  ``data/...`` (.json/.jsonl)
``energy/mlenergy_v2/data/...``         ml-energy/leaderboard-v2        ``data/...``
                                        @ 4e4fca8d
======================================  ==============================  =========================

Every downloaded file is checked before it is written: against ``MANIFEST.sha256`` for
files stored as published (the ML.ENERGY JSON), and, for files the data directory keeps
gzipped while the repository holds them plain, against the SHA-256 of the *decompressed*
file that ``MANIFEST.sha256`` lists (gzip output is not byte-reproducible, so the ``.gz``
checksum itself cannot be re-created). Both kinds are pinned in :data:`PINNED_SHA256`,
generated from ``MANIFEST.sha256`` and the files it lists. When the destination already
has a ``MANIFEST.sha256``, files kept verbatim are also checked against it.

The URL is ``{base}/{owner}/{repo}/{commit}/{path}`` with ``base`` from ``--download-base``,
``ROUTING_GYM_DOWNLOAD_BASE`` or :data:`DEFAULT_BASE` (raw.githubusercontent.com); any base
that serves that layout works (an ``http://`` mirror or a ``file://`` directory).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from routing_gym.errors import RoutingGymError

DEFAULT_BASE = "https://raw.githubusercontent.com"
BASE_ENV = "ROUTING_GYM_DOWNLOAD_BASE"


@dataclass(frozen=True)
class Upstream:
    local_prefix: str
    repo: str
    commit: str
    remote_prefix: str
    gzipped_locally: bool  # the data directory stores X.gz of the repository's X


UPSTREAMS = (
    Upstream("outcomes/zeroeval/", "WildEval/ZeroEval", "8c1485ed", "result_dirs/", True),
    Upstream("outcomes/llmrouter/", "ulab-uiuc/LLMRouter", "4e7a7969", "data/", True),
    Upstream("energy/mlenergy_v2/data/", "ml-energy/leaderboard-v2", "4e4fca8d", "data/", False),
)

# data-directory path -> SHA-256 of the bytes the repository serves (the decompressed file
# for the .gz entries), generated from MANIFEST.sha256 and the files it lists.
PINNED_SHA256: dict[str, str] = {
    "outcomes/zeroeval/gsm/Athene-70B.json.gz": "bb1424070eb0ab7bd3fd7996f7f79e19b71a549c12094760dad5c3dd10fd103c",
    "outcomes/zeroeval/math-l5/Athene-70B.json.gz": "22bccb834b1693398c962a9b55fdcf40c1fb286cf4496dc9724151d9c6257cbf",
    "outcomes/zeroeval/gsm/Llama-3.1-405B-Inst@sambanova.json.gz": "da8c856048baea4670b7e2efd4b7536fd75602383220bb5aa6086b074b6f3951",
    "outcomes/zeroeval/math-l5/Llama-3.1-405B-Inst@sambanova.json.gz": "86dea7ae26e0c217425f7f8f3d496ddf8cb8592cd41c9d8f4297a20ae8644c8a",
    "outcomes/zeroeval/gsm/Meta-Llama-3.1-405B-Instruct@hyperbolic.json.gz": "e64f5464c52821a0dd4a601882024998365d9b5e47a51365f3841df4e487db74",
    "outcomes/zeroeval/math-l5/Meta-Llama-3.1-405B-Instruct@hyperbolic.json.gz": "281965fd9526ab6f3a8923402427584d38a539815c8189a4ee6b5c79299234b3",
    "outcomes/zeroeval/gsm/Llama-3.1-405B-Instruct-Turbo.json.gz": "7dd81cff6907aac5e4de1e4cb58dc4f631bb3ae4b3a09b8359a6794c2c9ab64d",
    "outcomes/zeroeval/gsm/Meta-Llama-3-70B-Instruct.json.gz": "f7a98392ee308364e4f2f975e50a2aa0fe1cbd782cdd8fc8328a540bf9c48d20",
    "outcomes/zeroeval/math-l5/Meta-Llama-3-70B-Instruct.json.gz": "95ad9e21ef8ebe43a64bfd4f87483bc4d51c7032a8176bce8ae02d9231d304f6",
    "outcomes/zeroeval/gsm/Meta-Llama-3-8B-Instruct.json.gz": "d94c9110080255cc268ca902f4f308b6118ba759969868e97f99ad8fd302ac6f",
    "outcomes/zeroeval/math-l5/Meta-Llama-3-8B-Instruct.json.gz": "a405e428bf91dc4a6a2cc83d5f7d45c3dfc8b90957697f9c82af90c3228237f8",
    "outcomes/zeroeval/gsm/Meta-Llama-3.1-70B-Instruct.json.gz": "b8e002cd8490719995e401f3eaf9d8befc4ca959edb91fdf78f71e621b86096e",
    "outcomes/zeroeval/math-l5/Meta-Llama-3.1-70B-Instruct.json.gz": "5a85578034cf2a5f7c4256dd43861ed910ab9ee4ea102e09dac183cd010f24e4",
    "outcomes/zeroeval/math-l5/Meta-Llama-3.1-70B-Instruct@hyperbolic.json.gz": "c3dba246957e45f666f791f6881e0a21151626f1eabc31bbc5c26ef8784cee9a",
    "outcomes/zeroeval/gsm/Meta-Llama-3.1-8B-Instruct.json.gz": "a4a42a1babe0f3d5bcd5de02aa53aa1c94d399d550acd9bfc836f4d95aaa748b",
    "outcomes/zeroeval/math-l5/Meta-Llama-3.1-8B-Instruct.json.gz": "891f1ebeaee41a82972fbe1944fc3cd808e8e6beedf6314f34550ea42e4f2e5d",
    "outcomes/zeroeval/gsm/Mistral-Large-2.json.gz": "2408a17dd838ef40d1c2a18fe1ff28d4a44661cf13bf4e12e5354bb628782e88",
    "outcomes/zeroeval/math-l5/Mistral-Large-2.json.gz": "6c2561cd14bc9bd10718346af478ba9ffa6d8582f3ddd30fa95157bbcebd5817",
    "outcomes/zeroeval/gsm/Mistral-Nemo-Instruct-2407.json.gz": "436cae9a94c0d4bcd85b26d1a9ab58e6e5350605b29aa5765180d87671f7f92a",
    "outcomes/zeroeval/gsm/Mixtral-8x7B-Instruct-v0.1.json.gz": "ea24dc901aa4ddfe1234e75fbe83691538a7ec7a0133701475074da54824215f",
    "outcomes/zeroeval/math-l5/Phi-3-mini-4k-instruct.json.gz": "17aca03011d05d5d694897601876b06573a3836dab893db718e65be59b790fb5",
    "outcomes/zeroeval/gsm/Phi-3.5-mini-instruct.json.gz": "c694b0abc535f52317cb1b4548c0c45426559d30a91360983e6978ca7699ca56",
    "outcomes/zeroeval/math-l5/Phi-3.5-mini-instruct.json.gz": "b8310a6088271c332c740ec9af5ed4a90a59608be3df9a286aa37042f5de8896",
    "outcomes/zeroeval/gsm/Qwen2-72B-Instruct.json.gz": "6771d7cb9f93aaac58f7baef974047fb989e5eca2e8a772e84a97f2f0c594c53",
    "outcomes/zeroeval/math-l5/Qwen2-72B-Instruct.json.gz": "c111420f784c96e38ccf56fc29051835d045dac322fbfd8da7d69c127baaaba7",
    "outcomes/zeroeval/gsm/Qwen2-7B-Instruct.json.gz": "c6d5638659ebaef05a2e8f144914c33b699e7785c7f039fccdb0463d931aa370",
    "outcomes/zeroeval/math-l5/Qwen2-7B-Instruct.json.gz": "382489a0c6e1235c49442b8eba7ab7d224e7348730ee553751509505fe35ea73",
    "outcomes/zeroeval/math-l5/Qwen2.5-3B-Instruct.json.gz": "4412b79ef7631f42f47a6f686f0a10053a72de0347722827306d628780743cdd",
    "outcomes/zeroeval/math-l5/Qwen2.5-7B-Instruct.json.gz": "ed95ec0d5ff15550c60f79eab6163ace4671c641798585fc32b3081cd222e644",
    "outcomes/zeroeval/math-l5/Qwen2.5-32B-Instruct.json.gz": "53f875907b9cffcbfe0b94300e782ac288ae4e9966733a8e8cf58109532c6419",
    "outcomes/zeroeval/math-l5/Qwen2.5-72B-Instruct.json.gz": "490efd4164c69d98933dc0f1b1303ed4890237d0b0b2593bf20c1bf0d477b892",
    "outcomes/zeroeval/gsm/Yi-1.5-34B-Chat.json.gz": "c2b75d450a23d4842d4e112500e7143038e60d6c7c087ba2b839ed990750014f",
    "outcomes/zeroeval/math-l5/Yi-1.5-34B-Chat.json.gz": "b246a8c66c540b1df16e840264ce17c33380f257748c951b83760e83769a3bb1",
    "outcomes/zeroeval/gsm/Yi-1.5-9B-Chat.json.gz": "681a236d0ffed6be6959f70e3d07295bc1b78d9b226d8030c9ab527c48f77b91",
    "outcomes/zeroeval/math-l5/Yi-1.5-9B-Chat.json.gz": "5837a76d18183a4e840ab7371930d7f743c255aeac3b6d8c5da4efc2aa7622c1",
    "outcomes/zeroeval/gsm/deepseek-v2.5-0908.json.gz": "77b82f54507109f1d97a879d8b09b88177405e7cd901b2a260995e53422b6df0",
    "outcomes/zeroeval/math-l5/deepseek-v2.5-0908.json.gz": "11f2a1c7599c632bab24ddb04907ecba3bdc5bbd24973bd4e3896ecc5b6c88d2",
    "outcomes/zeroeval/gsm/gemma-2-2b-it.json.gz": "c585686d15bb7dea0562145b97a46789ed94be5cf15d9bda15377dbbaadd417d",
    "outcomes/zeroeval/math-l5/gemma-2-2b-it.json.gz": "957264912a36236c2597cd6448a3606f84334c8e9605f1be11f61d332312ee9e",
    "outcomes/zeroeval/gsm/gemma-2-9b-it.json.gz": "e0516d4739f6d1edb640308ac0c3f9357cce0cd5f38918456ca183e3212e100f",
    "outcomes/zeroeval/math-l5/gemma-2-9b-it.json.gz": "5d93441ca6653c9c41af9e5b07cd6be48d4a311825083a6d10ccfb34ade34a80",
    "outcomes/zeroeval/gsm/gemma-2-27b-it@together.json.gz": "2d247df22b0babf89a6adec74db8d84848eb2f904e6ecf4d324c4963b0d11053",
    "outcomes/zeroeval/math-l5/gemma-2-27b-it.json.gz": "afd68ea25a12611d58b54b77aeb45e9eddfea3864fe91741c9b3d88e5c31190c",
    "energy/mlenergy_v2/data/llm_text_generation/chat/H100 80GB HBM3/google/gemma-2-27b-it/bs128+tp2+pp1.json": "2bdbd281295f501538b0f2ae7126c64bce445d1583caf299b7baac74d8db1543",
    "energy/mlenergy_v2/data/llm_text_generation/chat/H100 80GB HBM3/google/gemma-2-2b-it/bs192+tp1+pp1.json": "80ce46c5a38a94335c5df278e9d8405cf4b4bdb62ea46c6019a6e5bcacf9d125",
    "energy/mlenergy_v2/data/llm_text_generation/chat/H100 80GB HBM3/google/gemma-2-9b-it/bs128+tp1+pp1.json": "e68663f546c70e59d83eac7e85c4c16cfc154459eef1b7ed6ba6b05e7f38c44c",
    "energy/mlenergy_v2/data/llm_text_generation/chat/H100 80GB HBM3/meta-llama/Meta-Llama-3.1-405B-Instruct/bs128+tp8+pp2.json": "8f85e691ee53188f0705079b05e5fd8bd6aaf127a02bb6afcf08ef271eb212c6",
    "energy/mlenergy_v2/data/llm_text_generation/chat/H100 80GB HBM3/meta-llama/Meta-Llama-3.1-70B-Instruct/bs128+tp4+pp1.json": "1887b2a916d620cbf2578730dbc3874027a811aa223a8bdd45c6683059ad93ae",
    "energy/mlenergy_v2/data/llm_text_generation/chat/H100 80GB HBM3/meta-llama/Meta-Llama-3.1-8B-Instruct/bs128+tp1+pp1.json": "c79aac754bedf8d8a3ed6176e0415958fe6e88371a4edb8fce79ea169f04b664",
    "energy/mlenergy_v2/data/llm_text_generation/chat/H100 80GB HBM3/microsoft/Phi-3-medium-4k-instruct/bs128+tp1+pp1.json": "87cd8846ea94e5562f4417e40a480bae59652b1d9014de540adbb9ec7a06c822",
    "energy/mlenergy_v2/data/llm_text_generation/chat/H100 80GB HBM3/microsoft/Phi-3-mini-4k-instruct/bs128+tp1+pp1.json": "d91ed0be75df8251ab1b71c3555bde27893b7854144cf58cb684481b273824e0",
    "energy/mlenergy_v2/data/llm_text_generation/chat/H100 80GB HBM3/microsoft/Phi-3-small-8k-instruct/bs128+tp1+pp1.json": "9840e57968efe77bee540e30c213f3c6b94f9cdadb32ea475201a16de96ff243",
    "energy/mlenergy_v2/data/llm_text_generation/chat/H100 80GB HBM3/mistralai/Mistral-7B-Instruct-v0.3/bs128+tp1+pp1.json": "adf82ff6d3091f8190e1b64471869d9b1903adecf376d38160799f22fe83a694",
    "energy/mlenergy_v2/data/llm_text_generation/chat/H100 80GB HBM3/mistralai/Mistral-Large-Instruct-2407/bs128+tp8+pp1.json": "be60ed54d87880c954273688639714c71d5e2dbba39a2d423bd23ee91bc7a568",
    "energy/mlenergy_v2/data/llm_text_generation/chat/H100 80GB HBM3/mistralai/Mistral-Nemo-Instruct-2407/bs128+tp1+pp1.json": "5bef2eea03ab32dd45108a62f93cf53e3dd3be43bb4bdb7fd2c180cb2f75f09c",
    "energy/mlenergy_v2/data/llm_text_generation/chat/H100 80GB HBM3/mistralai/Mixtral-8x22B-Instruct-v0.1/bs128+tp8+pp1.json": "fe336db40806611213f382775dd0d598b3db974e92d21299ab9dc173a6470986",
    "energy/mlenergy_v2/data/llm_text_generation/chat/H100 80GB HBM3/mistralai/Mixtral-8x7B-Instruct-v0.1/bs128+tp4+pp1.json": "48ed14462064414f76a15967b4abdd64e257c6b014caa3ba405a135c4827b15f",
    "energy/mlenergy_v2/data/llm_text_generation/code/H100 80GB HBM3/google/codegemma-7b/bs128+tp1+pp1.json": "aa25e9b73a546293f9f0d334bf91d1c6038f4bb5fb68a752e4dbc811c7e77018",
    "outcomes/llmrouter/dcrouter_preprocessed/train.json.gz": "ad3ae70149998f02cbf0dd4557ccb6afcf365ac9391b7371329ffc22201e90e3",
    "outcomes/llmrouter/example_data/query_data/default_query_train.jsonl.gz": "f1b2e3281dc3f9e082016812e1a778ca30e9828c7e58fa0a9f6dc52350ad4b8c",
    "outcomes/llmrouter/dcrouter_preprocessed/test.json.gz": "fbb6d3e3f62c7018e5446d3154cc05812d3124381f774738e9f0bac5bff79c79",
    "outcomes/llmrouter/example_data/query_data/default_query_test.jsonl.gz": "0fdf4b4236fb81c1a673a01950fb974e02599c83164b0e7832888aefaa490e27",
}

# Which pinned files each build reads.
BUILD_FILES: dict[str, Callable[[str], bool]] = {
    "zeroeval-math": lambda p: p.startswith(("outcomes/zeroeval/", "energy/mlenergy_v2/data/llm_text_generation/chat/")),
    "llmrouter": lambda p: p.startswith(("outcomes/llmrouter/", "energy/mlenergy_v2/")),
}


def upstream_of(local_path: str) -> tuple[Upstream, str]:
    """The repository and repository path of a data-directory path."""
    for up in UPSTREAMS:
        if local_path.startswith(up.local_prefix):
            remote = up.remote_prefix + local_path[len(up.local_prefix):]
            return up, remote.removesuffix(".gz") if up.gzipped_locally else remote
    raise RoutingGymError(f"no public source known for {local_path!r}")


def url_for(local_path: str, base: str) -> str:
    up, remote = upstream_of(local_path)
    return f"{base.rstrip('/')}/{up.repo}/{up.commit}/{urllib.parse.quote(remote)}"


def _read_manifest(dest: Path) -> dict[str, str]:
    path = dest / "MANIFEST.sha256"
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            digest, name = line.split(None, 1)  # names contain spaces ("H100 80GB HBM3")
            out[name.strip().removeprefix("./")] = digest
    return out


def download(build: str, dest: str | os.PathLike, base: str | None = None, *, overwrite: bool = False,
             timeout_s: float = 60.0, disable_progress: bool | None = None) -> list[Path]:
    """Download and verify the files of ``build`` into the data directory ``dest``.

    Files already present are kept when their checksum is right (re-downloaded otherwise,
    or always with ``overwrite``). A checksum mismatch raises and writes nothing for that
    file. Returns the paths written or verified.
    """
    from tqdm.auto import tqdm

    if build not in BUILD_FILES:
        raise RoutingGymError(f"unknown build {build!r}; known: {', '.join(BUILD_FILES)}")
    base = base or os.environ.get(BASE_ENV) or DEFAULT_BASE
    root = Path(dest)
    manifest = _read_manifest(root)
    wanted = sorted(p for p in PINNED_SHA256 if BUILD_FILES[build](p))
    done = []
    for rel in tqdm(wanted, desc=f"download {build}", unit="file", disable=disable_progress):
        target = root / rel
        up, _ = upstream_of(rel)
        if target.exists() and not overwrite and _local_digest(target, up.gzipped_locally) == PINNED_SHA256[rel]:
            done.append(target)
            continue
        url = url_for(rel, base)
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                payload = response.read()
        except (urllib.error.URLError, OSError) as exc:
            raise RoutingGymError(f"{rel}: download from {url} failed ({exc})") from None
        digest = hashlib.sha256(payload).hexdigest()
        if digest != PINNED_SHA256[rel]:
            raise RoutingGymError(f"{rel}: checksum mismatch for {url}: got sha256 {digest}, "
                                  f"expected {PINNED_SHA256[rel]} (from MANIFEST.sha256)")
        data = gzip.compress(payload, mtime=0) if up.gzipped_locally else payload
        if not up.gzipped_locally and rel in manifest and manifest[rel] != digest:
            raise RoutingGymError(f"{rel}: {root / 'MANIFEST.sha256'} lists sha256 {manifest[rel]}, downloaded {digest}")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".part")
        tmp.write_bytes(data)
        tmp.replace(target)  # atomic: a crash never leaves a half-written file under the real name
        done.append(target)
    return done


def _local_digest(path: Path, gzipped: bool) -> str | None:
    try:
        data = path.read_bytes()
        return hashlib.sha256(gzip.decompress(data) if gzipped else data).hexdigest()
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
