"""Rate limits per API key: a token bucket each, in Redis when one is configured.

A bucket holds up to `burst` tokens and refills at `per_minute` tokens a minute; a request
takes one, and a request that finds less than one is refused (429). The anchor service's
defaults (burst 300, 60 a minute) apply unless the key's account sets its own.

With `FEES_REDIS_URL`, buckets live in Redis and are taken by one Lua script, so every worker
process and replica shares them and two concurrent requests never both take the last token;
the script reads Redis's own clock, so replicas with skewed clocks agree. Without it, buckets
live in this process. While Redis cannot be reached the limiter fails open onto the process's
own buckets (each process then enforces the limit by itself, carrying on from what Redis last
said the bucket held), logs it once per outage, counts every such request in `fallbacks`, and
tries Redis again after `REDIS_RETRY_SECONDS`: a request never fails, or waits longer than
Redis's short time-outs, because Redis is down.
"""

import logging
import math
import threading
import time
from typing import NamedTuple

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from service.accounts import Limit

log = logging.getLogger(__name__)

# Redis answers in well under a millisecond, but the time-out runs on this process's event loop,
# which reads the reply only when it is free: under CPU load it comes 100 ms late and more. At
# 0.1 s, busy processes took that for an outage and limited on their own, letting a key through
# at several times its limit (`make cluster-soak`: 43 of 90 requests for a burst of 30).
REDIS_TIMEOUT_SECONDS = 1.0
REDIS_RETRY_SECONDS = 1.0
REDIS_PREFIX = "fees:ratelimit:"
REMAINING = b"x-ratelimit-remaining"
RESET = b"x-ratelimit-reset"

# KEYS[1] the bucket; ARGV burst, tokens per second. Returns allowed (0/1), the tokens left
# and Redis's clock, as text (a Lua number returned to Redis is cut to an integer).
TAKE_SCRIPT = """
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local saved = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(saved[1]) or burst
local at = tonumber(saved[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local allowed = 0
if tokens >= 1 then
    tokens = tokens - 1
    allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return {allowed, tostring(tokens), tostring(now)}
"""


class Decision(NamedTuple):
    """What taking a token decided. A named tuple, not a dataclass: one is made per request, and
    a frozen dataclass cost three times as much to build."""

    allowed: bool
    limit: Limit
    remaining: int  # whole tokens left
    reset: int  # Unix time at which the bucket is full again
    retry_after: int  # seconds until a token is there (0 when allowed)

    @classmethod
    def of(cls, limit: Limit, allowed: bool, tokens: float, now: float) -> "Decision":
        """The decision for a bucket left with `tokens` at Unix time `now`."""
        rate = limit.per_second
        return cls(
            allowed,
            limit,
            int(tokens),  # tokens >= 0: truncation is the floor
            math.ceil(now + (limit.burst - tokens) / rate),
            0 if allowed else max(1, math.ceil((1 - tokens) / rate)),
        )

    def headers(self) -> list[tuple[bytes, bytes]]:
        headers = [
            self.limit.header,
            (REMAINING, b"%d" % self.remaining),
            (RESET, b"%d" % self.reset),
        ]
        if not self.allowed:
            headers.append((b"retry-after", b"%d" % self.retry_after))
        return headers

    def lines(self) -> bytes:
        """An allowed decision's `headers` as written (`service.edge.wire`), in one step: an
        answer made at once writes them (the two builds cost 0.7 µs of its 5)."""
        assert self.allowed
        return b"%s: %s\r\n%s: %d\r\n%s: %d\r\n" % (
            *self.limit.header,
            REMAINING,
            self.remaining,
            RESET,
            self.reset,
        )


class LocalBuckets:
    """The buckets of this process. Thread-safe; each entry is (tokens, monotonic time)."""

    def __init__(self) -> None:
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, bucket: str, limit: Limit) -> Decision:
        now = time.monotonic()
        with self._lock:
            tokens, at = self._buckets.get(bucket) or (limit.burst, now)
            tokens = min(limit.burst, tokens + (now - at) * limit.per_second)
            allowed = tokens >= 1
            if allowed:
                tokens -= 1
            self._buckets[bucket] = (tokens, now)
        return Decision.of(limit, allowed, tokens, time.time())

    def mirror(self, bucket: str, tokens: float) -> None:
        """Remember what a shared bucket holds, so that if Redis goes away this process
        carries on from there rather than from a full bucket."""
        with self._lock:
            self._buckets[bucket] = (tokens, time.monotonic())


class Limiter:
    """Takes a token for a key: from Redis when configured and reachable, else locally."""

    def __init__(self, redis_url: str | None) -> None:
        self._local = LocalBuckets()
        self._redis = (
            None
            if redis_url is None
            else Redis.from_url(
                redis_url,
                socket_timeout=REDIS_TIMEOUT_SECONDS,
                socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
                # After Redis restarts, every pooled connection is dead and fails once when next
                # used, for seconds under load: try such a command again, once, on a new
                # connection rather than limit locally. A time-out is never tried again (the
                # script may have run), nor is anything waited for between the two tries.
                retry=Retry(NoBackoff(), 1),
                retry_on_error=[RedisConnectionError],
            )
        )
        self._script = None if self._redis is None else self._redis.register_script(TAKE_SCRIPT)
        self._redis_back_at = 0.0  # monotonic time before which Redis is not tried again
        self._redis_down = False
        self.fallbacks = 0  # requests limited locally because Redis was unreachable
        self.refused = 0  # requests answered 429

    @property
    def local(self) -> bool:
        """Whether this process's own buckets decide (no Redis configured)."""
        return self._script is None

    async def take(self, bucket: str, limit: Limit) -> Decision:
        if self._script is None:
            return self.take_here(bucket, limit)
        return self._counted(await self._shared(bucket, limit))

    def take_here(self, bucket: str, limit: Limit) -> Decision:
        """A token from this process's own buckets, at once (what `take` does when `local`)."""
        return self._counted(self._local.take(bucket, limit))

    def _counted(self, decision: Decision) -> Decision:
        if not decision.allowed:
            self.refused += 1
        return decision

    async def _shared(self, bucket: str, limit: Limit) -> Decision:
        assert self._script is not None
        if time.monotonic() < self._redis_back_at:
            self.fallbacks += 1
            return self._local.take(bucket, limit)
        try:
            allowed, tokens, now = await self._script(
                keys=[REDIS_PREFIX + bucket], args=[limit.burst, limit.per_second]
            )
        except (RedisError, OSError) as error:
            if not self._redis_down:
                log.warning("rate limits: Redis unreachable (%s); limiting in this process", error)
            self._redis_down = True
            self._redis_back_at = time.monotonic() + REDIS_RETRY_SECONDS
            self.fallbacks += 1
            return self._local.take(bucket, limit)
        if self._redis_down:
            log.warning("rate limits: Redis reachable again")
            self._redis_down = False
        self._local.mirror(bucket, float(tokens))
        return Decision.of(limit, bool(allowed), float(tokens), float(now))

    async def close(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()
