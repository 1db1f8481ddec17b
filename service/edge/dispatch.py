"""Which declared endpoint a request's path names, found in one walk over its segments.

Starlette's router tries its routes in turn, each a regular expression. With every endpoint
under two version prefixes, with and without the slash, the API was about 70 routes, and a
request to a late one spent 29-66 µs being matched before its handler ran (`docs/benchmarks.md`,
issue 40). Here the API's endpoints (`service.api.ENDPOINTS`) are a tree of path segments,
walked once: a segment is looked up among the literal ones first, then taken as a parameter,
so `/fee-schedule-results/filters` is not read as a record id. A path none of them takes goes
on to Starlette: the pages, the metrics scrape and the 404s.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from service import remembered

RECENT_PATHS: Final = 4096
Handler = Callable[[Request], Response | Awaitable[Response]]


@dataclass(frozen=True, eq=False)
class Route:
    """One endpoint as the front door serves it. `template` names it in metrics and access
    lines (its documented path, without the version prefix or the slash); `parameters` says
    how each query parameter it takes reads (`service.endpoints.params`)."""

    template: str
    handler: Handler
    parameters: dict[str, Any]
    methods: tuple[str, ...]  # ("GET", "HEAD"), or ("POST",)
    on_loop: bool  # an `async def` or quick handler runs on the event loop; any other in a thread
    quick: bool = False  # `service.api.Endpoint.quick`: made at once even when not cached

    @property
    def allow(self) -> str:
        """A 405's `Allow` header."""
        return ", ".join(self.methods)

    async def answer(self, request: Request) -> Response:
        answered: Response | Awaitable[Response] = (
            self.handler(request)
            if self.on_loop
            else await run_in_threadpool(self.handler, request)
        )
        return answered if isinstance(answered, Response) else await answered


@dataclass(eq=False)
class _Node:
    literal: dict[str, "_Node"] = field(default_factory=dict)
    parameter: tuple[str, "_Node"] | None = None  # its name, and what follows it
    route: Route | None = None


class PathTable:
    """The declared paths, as a tree of their segments. A `{name}` segment takes any non-empty
    segment, as Starlette's `{name}` does; a path ending in `/` is its own entry."""

    def __init__(self) -> None:
        self._root = _Node()
        # Paths resolved lately, with what they resolved to: a walk costs about 0.7 µs, a
        # repeated path (a cached answer's) one lookup. Cleared when full; a long path is
        # not kept, so the memo holds at most about 1 MB of paths.
        self._recent: dict[str, tuple[Route, dict[str, str]] | None] = {}

    def add(self, path: str, route: Route) -> None:
        node = self._root
        for segment in path.split("/")[1:]:
            if segment.startswith("{") and segment.endswith("}"):
                name = segment[1:-1]
                if node.parameter is None:
                    node.parameter = (name, _Node())
                elif node.parameter[0] != name:
                    raise ValueError(f"{path}: {{{name}}} where another path has "
                                     f"{{{node.parameter[0]}}}")  # fmt: skip
                node = node.parameter[1]
            else:
                node = node.literal.setdefault(segment, _Node())
        if node.route is not None:
            raise ValueError(f"{path}: declared twice")
        node.route = route

    def resolve(self, path: str) -> tuple[Route, dict[str, str]] | None:
        """The route `path` names and its path parameters (not to be changed: a repeated
        path gets the same), or None when it names none."""
        try:
            return self._recent[path]
        except KeyError:
            pass
        path_params: dict[str, str] = {}
        route = _walk(self._root, path.split("/"), 1, path_params) if path[:1] == "/" else None
        resolved = None if route is None else (route, path_params)
        if len(path) <= remembered.PATH_CHARS:
            remembered.keep(self._recent, path, resolved, RECENT_PATHS)
        return resolved


def _walk(node: _Node, segments: list[str], at: int, path_params: dict[str, str]) -> Route | None:
    if at == len(segments):
        return node.route
    segment = segments[at]
    literal = node.literal.get(segment)
    if literal is not None:
        route = _walk(literal, segments, at + 1, path_params)
        if route is not None:
            return route
    if node.parameter is not None and segment:
        name, rest = node.parameter
        route = _walk(rest, segments, at + 1, path_params)
        if route is not None:
            path_params[name] = segment
            return route
    return None
