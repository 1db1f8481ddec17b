"""What `make bench` asks (`tools.bench`): a cold case measured in rounds asks every request
once, so its later rounds find nothing its first put in the response cache."""

from tools.bench import ROUNDS, Case, rounds_of


def test_each_round_of_a_cold_case_asks_paths_of_its_own() -> None:
    paths = tuple(
        f"/api/v1/suppliers/box/actions?start_date=2020-01-{day:02d}" for day in range(1, 29)
    )
    case = Case("actions (cold)", paths[0], {"Authorization": "Bearer demo-key"}, paths[1:])
    rounds = rounds_of(case)
    assert len(rounds) == ROUNDS
    asked = [path for each in rounds for path in each.paths]
    assert len(asked) == len(set(asked)) == len(paths) // ROUNDS * ROUNDS
    assert all(each.name == case.name and each.headers == case.headers for each in rounds)
