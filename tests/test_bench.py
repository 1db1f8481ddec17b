"""What `make bench` asks (`tools.bench`): a cold case measured in rounds asks every request
once, so its later rounds find nothing its first put in the response cache; and a case paired
with another server's in alternate order runs each first in half of its rounds."""

import pytest

from tools import bench
from tools.bench import ACCESS_ROUNDS, ROUNDS, Case, Load, rounds_of


@pytest.mark.parametrize("count", [ROUNDS, ACCESS_ROUNDS])
def test_each_round_of_a_cold_case_asks_paths_of_its_own(count: int) -> None:
    paths = tuple(
        f"/api/v1/suppliers/box/actions?start_date=2020-01-{day:02d}" for day in range(1, 29)
    )
    case = Case("actions (cold)", paths[0], {"Authorization": "Bearer demo-key"}, paths[1:])
    rounds = rounds_of(case, count)
    assert len(rounds) == count
    asked = [path for each in rounds for path in each.paths]
    assert len(asked) == len(set(asked)) == len(paths) // count * count
    assert all(each.name == case.name and each.headers == case.headers for each in rounds)


@pytest.mark.parametrize("alternate", [False, True])
def test_paired_rounds_run_the_reference_first_or_each_first_in_turn(
    alternate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wrk itself is not run: the order of the loads and their pairing is what is checked."""
    order: list[int] = []

    def loaded(port: int, case: Case, seconds: int, connections: int) -> Load:
        order.append(port)
        return Load(float(port), 1.0, 2.0)  # a load that says which server it loaded

    monkeypatch.setattr(bench, "wrk", loaded)
    case = Case("participants", "/p", {})
    rounds = bench.paired(1, case, 2, 8, 32, case, rounds=4, alternate=alternate)
    assert order == ([2, 1, 1, 2, 2, 1, 1, 2] if alternate else [2, 1] * 4)
    # Each pair is (the case's load, the reference's), whichever ran first.
    assert [(mine.requests_per_second, other.requests_per_second) for mine, other in rounds] == [
        (1.0, 2.0)
    ] * 4
