"""What `/metrics` reports, in Prometheus's text format through the official client.

Requests are counted by route template and status, with a latency histogram, in plain dicts
the front door updates on the event loop; the client's own metric objects take a lock per
update, and a cached answer is answered in tens of microseconds. A collector turns the dicts,
the dataset version, the response cache and the rate limiter into metric families when
`/metrics` is scraped. Each app has its own registry (tests run many apps in one process).
"""

import bisect
import itertools
from collections.abc import Iterator
from typing import Final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from service.dataset.watcher import DatasetHolder
from service.edge.cache import ResponseCache
from service.edge.ratelimit import Limiter
from service.memory import resident

# Seconds: a cached answer takes well under a millisecond, an export can take many seconds.
BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
OTHER: Final = "other"  # the route label of a path no route answers


class RequestStats:
    """Per (route, status): the count of requests in each latency bucket (the last one past
    every bound) and the sum of their seconds. Updated on the event loop only."""

    def __init__(self) -> None:
        self.by_route: dict[tuple[str, int], tuple[list[int], list[float]]] = {}
        self.at_once = 0  # of them, answered by the connection at once (`FrontDoor.at_once`)

    def observe(self, route: str, status: int, seconds: float) -> None:
        entry = self.by_route.get((route, status))
        if entry is None:
            entry = self.by_route[route, status] = ([0] * (len(BUCKETS) + 1), [0.0])
        counts, total = entry
        counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        total[0] += seconds


class ServiceCollector(Collector):
    def __init__(
        self, stats: RequestStats, holder: DatasetHolder, cache: ResponseCache, limiter: Limiter
    ) -> None:
        self._stats = stats
        self._holder = holder
        self._cache = cache
        self._limiter = limiter

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily]:
        yield from self._requests()
        yield from self._dataset()
        memory = GaugeMetricFamily(
            "fees_process_resident_bytes", "This process's resident memory by part: anonymous "
            "(its own: what a replica must have), file (pages of the mapped dataset and "
            "libraries, which the kernel reclaims) and shared.", labels=["part"],
        )  # fmt: skip
        for part, size in resident().items():
            memory.add_metric([part], size)
        yield memory
        cache = CounterMetricFamily(
            "fees_response_cache_lookups", "Response cache lookups, by result.", labels=["result"]
        )
        cache.add_metric(["hit"], self._cache.hits)
        cache.add_metric(["miss"], self._cache.misses)
        yield cache
        answers, cached_bytes = self._cache.size
        yield GaugeMetricFamily(
            "fees_response_cache_bytes", "Bytes of answers the response cache holds (its bound: "
            "FEES_CACHE_MB).", value=cached_bytes,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "fees_response_cache_answers", "Answers the response cache holds.", value=answers
        )
        yield CounterMetricFamily(
            "fees_rate_limited", "Requests refused for their key's rate limit (429).",
            value=self._limiter.refused,
        )  # fmt: skip
        yield CounterMetricFamily(
            "fees_rate_limit_fallbacks",
            "Requests limited in this process because Redis could not be reached.",
            value=self._limiter.fallbacks,
        )

    def _requests(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        requests = CounterMetricFamily(
            "fees_requests", "Requests answered, by route template and status.",
            labels=["route", "status"],
        )  # fmt: skip
        latency = HistogramMetricFamily(
            "fees_request_duration_seconds", "Time to answer, by route template and status.",
            labels=["route", "status"],
        )  # fmt: skip
        for (route, status), (counts, total) in sorted(self._stats.by_route.items()):
            labels = [route, str(status)]
            requests.add_metric(labels, sum(counts))
            bounds = (*map(str, BUCKETS), "+Inf")
            cumulative = list(zip(bounds, itertools.accumulate(counts), strict=True))
            latency.add_metric(labels, cumulative, total[0])
        yield requests
        yield latency
        yield CounterMetricFamily(
            "fees_answered_at_once", "Of the requests answered, those the connection answered "
            "at once, with no ASGI cycle: from the response cache, or by a quick endpoint's "
            "handler (an answer, its 304, 429 or error).",
            value=self._stats.at_once,
        )  # fmt: skip

    def _dataset(self) -> Iterator[GaugeMetricFamily]:
        dataset = self._holder.current
        version = GaugeMetricFamily(
            "fees_dataset_version", "The dataset version served (1), by id and as-of date.",
            labels=["version_id", "as_of"],
        )  # fmt: skip
        records = GaugeMetricFamily("fees_dataset_records", "Records in the version served.")
        faults = GaugeMetricFamily(
            "fees_dataset_faults", "Files of the version served that failed a query."
        )
        if dataset is not None:
            version.add_metric([dataset.version_id, dataset.manifest["as_of"]], 1)
            records.add_metric([], dataset.records)
            faults.add_metric([], len(dataset.faults))
        yield version
        yield records
        yield faults


def registry_for(collector: Collector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


async def metrics(request: Request) -> Response:
    """The service's metrics (no key: they hold counts, never data or keys)."""
    registry: CollectorRegistry = request.app.state.metrics
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
