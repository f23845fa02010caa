"""resolve_tournament: names, directories and their precedence."""

from __future__ import annotations

import pytest
from conftest import make_tournament

from routing_gym.errors import UnknownNameError
from routing_gym.sources import list_tournaments, resolve_tournament


def test_registered_name_wins_over_a_same_named_folder(tmp_path, monkeypatch):
    make_tournament().save(tmp_path / "paper-pool")
    monkeypatch.chdir(tmp_path)
    assert resolve_tournament("paper-pool").card.name == "paper-pool"
    assert resolve_tournament("default") is resolve_tournament("paper-pool")
    assert resolve_tournament("./paper-pool").card.name == "toy-60x4"
    assert resolve_tournament(tmp_path / "paper-pool").card.name == "toy-60x4"


def test_unknown_names_list_the_known_ones():
    with pytest.raises(UnknownNameError, match=r"did you mean .paper-pool.\? Registered: (.*, )?collapse-prone, default, .*paper-pool"):
        resolve_tournament("paper-pol")
    assert {"default", "paper-pool", "two-model", "zeroeval-math", "llmrouter"} <= set(list_tournaments())
