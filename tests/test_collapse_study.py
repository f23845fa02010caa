"""``routing-gym collapse``: the collapse study as a command, for online and full-feedback
agents, registered or ``--import``ed; readable plots."""

from __future__ import annotations

import textwrap

import matplotlib.image
import numpy as np
import pandas as pd
import pytest

from routing_gym.cli import main
from routing_gym.eval.collapse import CollapseTracker

from conftest import make_tournament

TINY = ["--gate-fractions", "0", "0.5", "1.2", "--window", "20", "--feature-dim", "4"]

USER_AGENT = textwrap.dedent('''
    import numpy as np
    from routing_gym_agents import Agent, register_agent

    @register_agent("always-cheapest-online")
    class AlwaysCheapestOnline(Agent):
        """Steps the training env once per query and always picks model 0 (collapses at once)."""
        feedback = "bandit"

        def fit(self, ctx):
            env = ctx.make_env()
            env.reset(seed=ctx.seed)
            for _ in range(ctx.n_train):
                env.step(0)
                env.reset()
            return {}

        def act_batch(self, batch):
            return np.zeros(len(batch), dtype=int)
''')


@pytest.fixture(scope="module")
def tournament_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("collapse") / "t"
    make_tournament(n=120, k=4).save(path)
    return path


def _pixels(path) -> tuple[int, int]:
    height, width = matplotlib.image.imread(path).shape[:2]
    return width, height


def test_linucb_fills_the_table_and_the_summary(tournament_dir, tmp_path, capsys):
    """linucb takes no entropy coefficient: every setting still gets its row (issue 25: zero rows, a NaN plot)."""
    out = tmp_path / "out"
    assert main(["collapse", "--agent", "linucb", "--tournament", str(tournament_dir), *TINY, "--out", str(out)]) == 0
    results = pd.read_csv(out / "results.csv")
    table_rows = [line for line in (out / "table.md").read_text().splitlines() if line.startswith("| gated_rank")]
    assert len(results) == 3 and len(table_rows) == 3
    assert results["final_top1_share"].notna().all() and results["cumulative_regret"].notna().all()
    assert "online training decisions" in (out / "table.md").read_text()
    for name in ("summary.png", "curves.png", "shares_gated_rank.png"):
        width, height = _pixels(out / name)
        assert width >= 600 and height >= 300, (name, width, height)
    assert "wrote" in capsys.readouterr().out


def test_full_feedback_agent_is_tracked_on_held_out_routes(tournament_dir, tmp_path):
    out = tmp_path / "knn"
    assert main(["collapse", "--agent", "knn", "--tournament", str(tournament_dir), *TINY, "--no-plots",
                 "--out", str(out)]) == 0
    text = (out / "table.md").read_text()
    assert "Tracked decisions: **held-out routes**" in text
    assert "`knn` does not train on the reward" in text
    results = pd.read_csv(out / "results.csv")
    n_test = len(make_tournament(n=120, k=4).split_rows("test"))
    assert (results["decisions"] == n_test).all()


def test_imported_agent_collapses_onto_model_zero(tournament_dir, tmp_path):
    module = tmp_path / "my_collapsing_agent.py"
    module.write_text(USER_AGENT)
    out = tmp_path / "mine"
    assert main(["collapse", "--import", str(module), "--agent", "always-cheapest-online", "--tournament",
                 str(tournament_dir), *TINY, "--no-plots", "--out", str(out)]) == 0
    results = pd.read_csv(out / "results.csv")
    assert results["collapsed"].all() and (results["collapsed_onto"] == "m0").all()
    assert (results["collapse_step"] == 19).all()  # the 20th decision fills the first window


def test_a_window_longer_than_the_tracked_decisions_is_adapted(tournament_dir, tmp_path):
    """The default window (250) on a small test split never closed: 'collapsed 0/1' beside top-1 1.00."""
    out = tmp_path / "fixed"
    assert main(["collapse", "--agent", "fixed-smallest", "--tournament", str(tournament_dir), "--gate-fractions", "0.5",
                 "--no-plots", "--out", str(out)]) == 0
    n_test = len(make_tournament(n=120, k=4).split_rows("test"))
    text = (out / "table.md").read_text()
    assert f"250 decisions per window is longer than the {n_test} held-out routes" in text
    assert f"windows of {n_test // 4} decisions are used" in text
    results = pd.read_csv(out / "results.csv")
    assert results["collapsed"].all() and results["final_top1_share"].eq(1.0).all()


def test_bad_settings_exit_2_before_training(tournament_dir, tmp_path, capsys):
    assert main(["collapse", "--agent", "linucbb", "--tournament", str(tournament_dir), "--out", str(tmp_path)]) == 2
    assert "did you mean 'linucb'" in capsys.readouterr().err
    assert main(["collapse", "--agent", "linucb", "--agent-kwargs", '{"nope": 1}', "--tournament",
                 str(tournament_dir), "--out", str(tmp_path)]) == 2
    assert "agent 'linucb'" in capsys.readouterr().err


def test_a_single_tracker_plot_is_readable_with_its_legend_inside(tmp_path):
    tracker = CollapseTracker(n_models=5, window=10, model_ids=[f"model-{k}" for k in range(5)])
    tracker.update_many(np.random.default_rng(0).integers(0, 5, 200))
    path = tracker.plot(tmp_path / "shares.png")
    width, height = _pixels(path)
    assert width >= 640 and height >= 380, (width, height)  # was 378 x 261 px
    image = matplotlib.image.imread(path)
    # the legend strip at the bottom holds drawn (non-white) pixels: not clipped away
    assert (image[-int(0.12 * height):, :, :3] < 0.9).any()
