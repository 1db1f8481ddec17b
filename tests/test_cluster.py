"""`make cluster-soak`, shortened: three replicas behind HAProxy, Redis and an S3 server, under
load while versions are published, a replica is killed and Redis restarts."""

from pathlib import Path

import pytest

from tests.servers import debian_program
from tools import cluster


@pytest.mark.slow
def test_the_cluster_answers_every_request_through_a_kill_a_restart_and_publishes(
    tmp_path: Path,
) -> None:
    for program in ("haproxy", "redis-server", "wrk"):
        debian_program(program, program)  # installed here, or the test is skipped saying why
    doc = tmp_path / "deploy.md"
    status = cluster.main(
        ["--seconds", "16", "--publish-every", "8", "--rows", "1000", "--burst", "6",
         "--connections", "8", "--root", str(tmp_path), "--doc", str(doc)]
    )  # fmt: skip
    report = doc.read_text(encoding="utf-8")
    assert status == 0, report
    assert "| errors (wrong status, socket errors, time-outs) | 0 | 0 | met |" in report
    assert "| from a publish to every replica serving it |" in report
    # The proof key's burst through the balancer, in total across the replicas.
    assert "6 answered 200 (replica 1: " in report
    assert "18 requests through the balancer" in report
