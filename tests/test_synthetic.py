"""Procedural tournaments: determinism, the shipped default, text_signal, calibration, gym ids, CLI."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from gymnasium.utils.env_checker import check_env

from routing_gym.cli import main
from routing_gym.envs.registration import PRESET_IDS, PROCEDURAL_ID
from routing_gym.errors import UnknownNameError
from routing_gym.paths import shipped_data_dir
from routing_gym.sources import list_tournaments, resolve_tournament
from routing_gym.sources.synthetic import (
    PRESETS,
    ProceduralConfig,
    ability_for_accuracy,
    expected_accuracy,
    generate,
    preset_config,
)
from routing_gym.eval.core.summary import oracle_rows
from routing_gym.tournament import Tournament
from routing_gym.tournament.schema import METRIC_ARRAYS


def assert_same_tournament(a: Tournament, b: Tournament) -> None:
    pd.testing.assert_frame_equal(a.queries, b.queries)
    pd.testing.assert_frame_equal(a.models, b.models)
    for name in METRIC_ARRAYS:
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    assert (a.output_text is None) == (b.output_text is None)
    assert a.card.to_dict() == b.card.to_dict()


@pytest.fixture(scope="module")
def paper_pool() -> Tournament:
    return Tournament.load(shipped_data_dir() / "paper-pool")


# ---------------------------------------------------------------------- shipped default, determinism
def test_shipped_paper_pool_equals_regeneration_from_its_seed(paper_pool):
    files = list((shipped_data_dir() / "paper-pool").iterdir())
    assert {f.name for f in files} == {"card.json", "CARD.md", "queries.parquet", "models.parquet", "outcomes.parquet"}
    assert sum(f.stat().st_size for f in files) < 1_000_000
    assert paper_pool.card.provenance == "synthetic" and set(paper_pool.models["energy_provenance"]) == {"synthetic"}
    assert_same_tournament(paper_pool, generate(preset_config("paper-pool")))
    # The data card alone is enough to regenerate it.
    assert_same_tournament(paper_pool, generate(ProceduralConfig.from_dict(paper_pool.card.extra["config"])))
    # The offline default resolves to the shipped files, split 2,050 : 913 as in the paper.
    default = resolve_tournament("default")
    assert default.card.name == "paper-pool" and default.n_queries == paper_pool.n_queries
    assert [len(default.split_rows(s)) for s in ("train", "test")] == [2050, 913]


def test_generation_is_deterministic_in_the_seed_and_text_signal_never_moves_outcomes():
    config = ProceduralConfig(n_queries=400, seed=11, splits=None)
    a, b = generate(config), generate(ProceduralConfig(n_queries=400, seed=11, splits=None))
    assert_same_tournament(a, b)
    other = generate(ProceduralConfig(n_queries=400, seed=12, splits=None))
    assert not np.array_equal(a.correct, other.correct) and a.queries["prompt"].tolist() != other.queries["prompt"].tolist()
    louder = generate(ProceduralConfig(n_queries=400, seed=11, splits=None, text_signal=1.0))
    for name in ("correct", "output_tokens"):
        assert np.array_equal(getattr(a, name), getattr(louder, name)), name
    assert a.queries["prompt"].tolist() != louder.queries["prompt"].tolist()


# ---------------------------------------------------------------------- text_signal
def test_text_signal_controls_how_well_text_predicts_correctness():
    """TF-IDF + logistic regression on the question text predicts whether Qwen2.5-7B is
    correct (held-out AUC): no better than the benchmark alone at 0, rising through 0.5 to 1."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    n_train, n = 3000, 4500
    aucs, bench_only = {}, None
    for signal in (0.0, 0.5, 1.0):
        t = generate(ProceduralConfig(n_queries=n, seed=5, text_signal=signal, splits=None))
        y = t.correct[:, t.model_index("qwen2.5-7b")]
        prompts = t.queries["prompt"].tolist()
        vectorizer = TfidfVectorizer(min_df=3, sublinear_tf=True).fit(prompts[:n_train])
        clf = LogisticRegression(C=1.0, max_iter=1000).fit(vectorizer.transform(prompts[:n_train]), y[:n_train])
        aucs[signal] = roc_auc_score(y[n_train:], clf.predict_proba(vectorizer.transform(prompts[n_train:]))[:, 1])
        if bench_only is None:  # outcomes do not depend on text_signal, so one baseline serves all
            onehot = pd.get_dummies(t.queries["benchmark"]).to_numpy(dtype=float)
            base = LogisticRegression(max_iter=1000).fit(onehot[:n_train], y[:n_train])
            bench_only = roc_auc_score(y[n_train:], base.predict_proba(onehot[n_train:])[:, 1])
    print(f"held-out AUC, benchmark only {bench_only:.3f}; TF-IDF by text_signal: "
          + ", ".join(f"{s:g}: {v:.3f}" for s, v in aucs.items()))
    assert aucs[0.0] < bench_only + 0.02  # the text adds nothing beyond its benchmark
    assert aucs[0.5] > aucs[0.0] + 0.03
    assert aucs[1.0] > aucs[0.5] + 0.04
    assert aucs[1.0] > bench_only + 0.1


# ---------------------------------------------------------------------- calibration
def test_paper_pool_calibration_shape(paper_pool):
    t = paper_pool
    acc = pd.Series(t.correct.mean(axis=0), index=t.model_ids)
    joules = pd.Series(t.energy_j.mean(axis=0), index=t.model_ids)
    params = t.models.set_index("model_id")["params_b"]
    reasoning = t.models.loc[t.models["reasoning"], "model_id"].tolist()
    assert len(t.model_ids) == 9 and len(t.benchmarks) == 7 and len(reasoning) == 2

    # Accuracy rises with size: strictly within Qwen2.5, strongly correlated across the pool.
    qwen = ["qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b"]
    assert acc[qwen].is_monotonic_increasing and acc[qwen].diff().dropna().min() > 0.03
    assert np.corrcoef(np.log(params[t.model_ids]), acc)[0, 1] > 0.8
    # Always-Qwen2.5-7B on the held-out split: the paper's 64.0 % at 281.6 J.
    test = t.split_rows("test")
    i7 = t.model_index("qwen2.5-7b")
    assert abs(t.correct[test, i7].mean() - 0.640) < 0.02
    assert abs(t.energy_j[test, i7].mean() / 281.6 - 1) < 0.05

    # Reasoning models are the most accurate on math and cost an order of magnitude more.
    math_rows = t.queries["benchmark"].to_numpy() == "math500"
    math_acc = pd.Series(t.correct[math_rows].mean(axis=0), index=t.model_ids)
    assert set(math_acc.nlargest(2).index) == set(reasoning)
    assert all(joules[m] >= 10 * joules["qwen2.5-7b"] for m in reasoning)
    # Overthinking: within a benchmark, reasoning models' lengths have heavier upper tails.
    tokens = pd.DataFrame(t.output_tokens, columns=t.model_ids)
    by_benchmark = tokens.groupby(t.queries["benchmark"].to_numpy())
    tail = (by_benchmark.quantile(0.95) / by_benchmark.median()).median()
    assert tail[reasoning].min() > 1.3 * tail.drop(reasoning).max()

    # The oracle is far cheaper than the most accurate fixed model, and more accurate.
    best = acc.idxmax()
    cheapest_correct = oracle_rows(t).iloc[1]
    assert cheapest_correct["accuracy"] > acc[best] + 0.1
    assert cheapest_correct["mean_energy_j"] < 0.2 * joules[best]

    # MATH-500: ~13 % of questions, about half of the answer energy (paper: 52-57 %).
    assert 0.12 < math_rows.mean() < 0.14
    assert 0.45 < t.energy_j[math_rows].sum() / t.energy_j.sum() < 0.62
    assert 0.45 < t.energy_j[math_rows, i7].sum() / t.energy_j[:, i7].sum() < 0.62

    # The paper's GSM8K item sits inside each model's central 80 % on GSM8K.
    gsm = t.queries["benchmark"].to_numpy() == "gsm8k"
    for model, was_correct, paper_joules in (("qwen2.5-0.5b", 1, 82), ("deepseek-r1-distill-8b", 1, 2864), ("llama3.1-8b", 0, 638)):
        k = t.model_index(model)
        energy = t.energy_j[gsm & (t.correct[:, k] == was_correct), k]
        low, high = np.percentile(energy, [10, 90])
        assert low < paper_joules < high, (model, low, high)


def test_abilities_reproduce_target_accuracies_and_noise_only_moves_correlation():
    targets = np.array([0.2, 0.5, 0.83])
    assert np.allclose(expected_accuracy(ability_for_accuracy(targets, 1.5), 1.5), targets, atol=1e-6)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        ability_for_accuracy(1.0)

    def draw(noise: float) -> Tournament:
        return generate(preset_config("paper-pool", n_queries=20000, noise=noise, seed=3, splits=None))

    shared, independent = draw(0.0), draw(1.0)
    assert np.allclose(shared.correct.mean(axis=0), independent.correct.mean(axis=0), atol=0.02)
    corr = lambda t: np.corrcoef(t.correct.T)[np.triu_indices(t.n_models, 1)].mean()  # noqa: E731
    assert corr(shared) > corr(independent) + 0.2
    assert corr(independent) < 0.12  # only benchmark effects remain


# ---------------------------------------------------------------------- presets and gymnasium
def test_presets_are_registered_tournaments_and_gym_ids():
    assert set(PRESETS) <= set(list_tournaments())
    for name in PRESETS:
        t = resolve_tournament(name)
        assert t.card.name == name and t.card.provenance == "synthetic" and t.splits == ["test", "train"]
    two = resolve_tournament("two-model")
    strong, weak = two.model_index("strong-llama3.1-70b"), two.model_index("weak-llama3.1-8b")
    assert two.correct[:, strong].mean() > two.correct[:, weak].mean() + 0.1
    assert two.energy_j[:, strong].mean() > 5 * two.energy_j[:, weak].mean()
    collapse = resolve_tournament("collapse-prone")
    acc, joules = collapse.correct.mean(axis=0), collapse.energy_j.mean(axis=0)
    cheap = collapse.model_index("qwen2.5-7b")
    assert acc.max() - acc[cheap] < 0.06 and all(joules[j] > joules[cheap] for j in np.flatnonzero(acc > acc[cheap]))
    assert resolve_tournament("many-models").n_models >= 20

    for name, env_id in PRESET_IDS.items():
        env = gym.make(env_id, n_queries=240, split="test")
        check_env(env.unwrapped)
        assert env.unwrapped.tournament.card.name == name and env.action_space.n == len(preset_config(name).models)
    env = gym.make(PROCEDURAL_ID, n_queries=300, text_signal=1.0, seed=4, coefficients={"lambda_e": 0.4})
    check_env(env.unwrapped)
    obs, info = env.reset(seed=0)
    _, reward, terminated, _, info = env.step(0)
    assert terminated and (reward == -1.0 or 1.6 <= reward <= 2.0)
    with pytest.raises(TypeError, match="unknown option"):
        gym.make(PROCEDURAL_ID, bogus=1)


def test_config_errors_name_the_knob():
    with pytest.raises(ValueError, match="text_signal must be in"):
        ProceduralConfig(text_signal=1.5)
    config = ProceduralConfig()
    broken = config.to_dict()
    del broken["models"][0]["ability"]["math500"]
    with pytest.raises(ValueError, match=r"models\['qwen2.5-0.5b'\].ability.*math500"):
        ProceduralConfig.from_dict(broken)
    with pytest.raises(UnknownNameError, match="procedural preset 'nope'"):
        preset_config("nope")
    with pytest.raises(TypeError, match="unknown ProceduralConfig field"):
        preset_config("two-model", n_query=5)
    assert ProceduralConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_cli_generate_writes_the_same_tournament(tmp_path, capsys):
    out = tmp_path / "two"
    args = ["data", "generate", "--preset", "two-model", "--seed", "5", "--n-queries", "200", "--text-signal", "0.8"]
    assert main([*args, "--out", str(out)]) == 0
    assert "N=200 x K=2" in capsys.readouterr().out
    expected = generate(preset_config("two-model", seed=5, n_queries=200, text_signal=0.8))
    assert_same_tournament(Tournament.load(out), expected)
    assert main(["data", "generate", "--preset", "nope", "--out", str(tmp_path / "x")]) == 2  # a bad setting
    assert main(["data", "generate", "--text-signal", "2", "--out", str(tmp_path / "x")]) == 2
    assert "text_signal must be in [0, 1]" in capsys.readouterr().err
