"""--download: fetch from a mirror laid out like raw.githubusercontent.com, verify, build."""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import threading
from pathlib import Path

import numpy as np
import pytest

from routing_gym.cli import main
from routing_gym.errors import RoutingGymError
from routing_gym.sources.download import BUILD_FILES, PINNED_SHA256, download, upstream_of, url_for
from routing_gym.tournament import Tournament


def _mirror(data_dir: Path, where: Path, build: str) -> Path:
    """A local copy of the upstream repositories: plain files at {owner}/{repo}/{commit}/{path}."""
    for rel in PINNED_SHA256:
        if not BUILD_FILES[build](rel):
            continue
        up, remote = upstream_of(rel)
        data = (data_dir / rel).read_bytes()
        target = where / up.repo / up.commit / remote
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(gzip.decompress(data) if up.gzipped_locally else data)
    return where


@pytest.fixture
def http_mirror(data_dir, tmp_path):
    root = _mirror(data_dir, tmp_path / "mirror", "llmrouter")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_pins_match_the_manifest(data_dir):
    manifest = {}
    for line in (data_dir / "MANIFEST.sha256").read_text().splitlines():
        digest, name = line.split(None, 1)
        manifest[name.strip().removeprefix("./")] = digest
    for rel, pinned in PINNED_SHA256.items():
        data = (data_dir / rel).read_bytes()
        assert hashlib.sha256(data).hexdigest() == manifest[rel], rel
        up, _ = upstream_of(rel)
        assert hashlib.sha256(gzip.decompress(data) if up.gzipped_locally else data).hexdigest() == pinned, rel


def test_urls_follow_the_pinned_commits():
    assert url_for("outcomes/zeroeval/gsm/gemma-2-27b-it@together.json.gz", "https://raw.githubusercontent.com") == (
        "https://raw.githubusercontent.com/WildEval/ZeroEval/8c1485ed/result_dirs/gsm/gemma-2-27b-it%40together.json")
    url = url_for("energy/mlenergy_v2/data/llm_text_generation/chat/H100 80GB HBM3/google/gemma-2-9b-it/bs128+tp1+pp1.json", "B")
    assert url == "B/ml-energy/leaderboard-v2/4e4fca8d/data/llm_text_generation/chat/H100%2080GB%20HBM3/google/gemma-2-9b-it/bs128%2Btp1%2Bpp1.json"


def test_download_over_http_verifies_and_builds_the_same_tournament(http_mirror, data_dir, tmp_path, capsys):
    mirror, base = http_mirror
    dest = tmp_path / "fetched"
    out = tmp_path / "built"
    assert main(["data", "build", "llmrouter", "--download", "--download-base", base, "--data-dir", str(dest),
                 "--out", str(out)]) == 0
    assert "downloaded and verified 19 files" in capsys.readouterr().out
    for rel in PINNED_SHA256:
        if BUILD_FILES["llmrouter"](rel) and rel.endswith(".gz"):
            assert gzip.decompress((dest / rel).read_bytes()) == gzip.decompress((data_dir / rel).read_bytes())
    built = Tournament.load(out)
    from routing_gym.sources.llmrouter import build_llmrouter_tournament

    reference, _ = build_llmrouter_tournament(data_dir)
    assert np.array_equal(built.correct, reference.correct)
    assert np.allclose(built.energy_j, reference.energy_j)
    assert (out / "build_report.json").exists()


def test_tampered_or_missing_upstream_file_is_an_error(http_mirror, tmp_path):
    mirror, base = http_mirror
    victim = mirror / "ulab-uiuc" / "LLMRouter" / "4e7a7969" / "data" / "dcrouter_preprocessed" / "test.json"
    victim.write_bytes(victim.read_bytes().replace(b"0.0", b"1.0", 1))
    dest = tmp_path / "fetched"
    with pytest.raises(RoutingGymError, match=r"dcrouter_preprocessed/test\.json\.gz: checksum mismatch"):
        download("llmrouter", dest, base, disable_progress=True)
    assert not (dest / "outcomes" / "llmrouter" / "dcrouter_preprocessed" / "test.json.gz").exists()
    victim.unlink()
    with pytest.raises(RoutingGymError, match=r"test\.json\.gz: download from .* failed"):
        download("llmrouter", dest, base, disable_progress=True)


def test_file_url_base_and_reuse_of_verified_files(data_dir, tmp_path):
    mirror = _mirror(data_dir, tmp_path / "mirror", "llmrouter")
    dest = tmp_path / "fetched"
    first = download("llmrouter", dest, mirror.as_uri(), disable_progress=True)
    assert len(first) == 19
    # a second run finds every file verified and fetches nothing (the mirror is gone)
    for p in mirror.rglob("*"):
        if p.is_file():
            p.unlink()
    assert download("llmrouter", dest, mirror.as_uri(), disable_progress=True) == first
