"""The front door's dispatch table (`service.edge.dispatch`) against Starlette's router, which
it replaced for the API's endpoints: the same paths go to the same endpoints with the same path
parameters, and what none takes goes on."""

import itertools

import pytest
from starlette.routing import Match, Route

from service import api
from service.edge.dispatch import PathTable
from service.endpoints import health
from service.urls import PREFIXES

TABLE = api.table()


def starlette_routes() -> list[tuple[Route, str]]:
    """The routes `service.api` made for Starlette's router before the table, in declaration
    order (the order they were matched in), each with its endpoint's template."""
    made = []
    for endpoint in api.ENDPOINTS:
        bare = endpoint.path.rstrip("/")
        paths = (
            [prefix + bare + slash for prefix in PREFIXES for slash in ("", "/")]
            if endpoint.prefixed
            else [endpoint.path]
        )
        template = bare if endpoint.prefixed else endpoint.path
        made += [(Route(path, health.healthz), template) for path in paths]
    return made


STARLETTE_ROUTES = starlette_routes()


def starlette_match(path: str) -> tuple[str, dict[str, str]] | None:
    scope = {"type": "http", "path": path, "root_path": "", "method": "GET"}
    for route, template in STARLETTE_ROUTES:
        match, child = route.matches(scope)
        if match is Match.FULL:
            return template, child["path_params"]
    return None


# Segments to build paths from: the literal ones the API declares, values a parameter takes
# (one of them a literal elsewhere), and the empty segment of `//` and a trailing slash.
SEGMENTS = ["api", "v1", "suppliers", "box", "participants", "data", "count", "exchanges",
            "fee-schedule-results", "filters", "versions", "v-1", "fee-lines", "openapi.json",
            "healthz", "compare", "fee-estimates", "date-ranges", ""]  # fmt: skip


def paths() -> list[str]:
    """Every path of up to five of `SEGMENTS` under a prefix, and up to three at the root."""
    under = [
        prefix + "/" + "/".join(rest)
        for prefix in ("/api/v1", "/v1")
        for size in range(1, 4)
        for rest in itertools.product(SEGMENTS, repeat=size)
    ]
    root = [
        "/" + "/".join(rest) for size in (1, 2) for rest in itertools.product(SEGMENTS, repeat=size)
    ]
    return under + root


def test_the_table_sends_every_path_where_starlettes_router_did() -> None:
    checked = paths()
    assert len(checked) > 10_000
    for path in checked:
        resolved = TABLE.resolve(path)
        found = None if resolved is None else (resolved[0].template, resolved[1])
        assert found == starlette_match(path), path


@pytest.mark.parametrize(
    ("path", "template", "path_params"),
    [
        ("/api/v1/fee-schedule-results/filters", "/fee-schedule-results/filters", {}),
        ("/v1/fee-schedule-results/filters/", "/fee-schedule-results/filters", {}),
        # Not the versions endpoint without its id: a record id, as Starlette read it.
        ("/api/v1/fee-schedule-results/versions", "/fee-schedule-results/{record_id}",
         {"record_id": "versions"}),
        ("/api/v1/fee-schedule-results/versions/v-1", "/fee-schedule-results/versions/{version_id}",
         {"version_id": "v-1"}),
        ("/api/v1/suppliers/box/data/count/", "/suppliers/{supplier_name}/data/count",
         {"supplier_name": "box"}),
        ("/healthz", "/healthz", {}),
    ],
)  # fmt: skip
def test_a_literal_segment_comes_before_a_parameter(
    path: str, template: str, path_params: dict[str, str]
) -> None:
    resolved = TABLE.resolve(path)
    assert resolved is not None
    assert (resolved[0].template, resolved[1]) == (template, path_params)


@pytest.mark.parametrize(
    "path",
    ["/healthz/", "/api/v1//exchanges", "/api/v1/suppliers//participants", "/api/v1/exchanges//",
     "/api/v2/exchanges/", "", "api/v1/exchanges", "/docs", "/metrics"],
)  # fmt: skip
def test_what_no_endpoint_takes_is_not_resolved(path: str) -> None:
    assert TABLE.resolve(path) is None


def test_each_route_knows_its_methods_and_how_its_handler_runs() -> None:
    estimate = TABLE.resolve("/api/v1/fee-estimates")
    changes = TABLE.resolve("/api/v1/fee-changes/")
    assert estimate is not None and changes is not None
    assert (estimate[0].methods, estimate[0].allow, estimate[0].on_loop) == (
        ("POST",),
        "POST",
        True,
    )
    # `fee_changes` is a plain function: it runs in a worker thread, as Starlette ran it.
    assert (changes[0].methods, changes[0].allow, changes[0].on_loop) == (
        ("GET", "HEAD"),
        "GET, HEAD",
        False,
    )
    assert list(changes[0].parameters) == list(
        next(e for e in api.ENDPOINTS if e.operation == "listFeeChanges").query
    )


def test_a_path_declared_twice_or_with_two_names_for_one_parameter_is_refused() -> None:
    route = TABLE.resolve("/healthz")
    assert route is not None
    paths = PathTable()
    paths.add("/a/{name}/b", route[0])
    with pytest.raises(ValueError, match="declared twice"):
        paths.add("/a/{name}/b", route[0])
    with pytest.raises(ValueError, match="another path has"):
        paths.add("/a/{other}/c", route[0])
