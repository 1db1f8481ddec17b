"""The probes an orchestrator and a monitor call, without a key: is the process alive, and is
it ready to answer from a readable dataset version."""

from starlette.requests import Request

from service.dataset.watcher import DatasetHolder, VersionWatcher
from service.responses import JSON


async def healthz(request: Request) -> JSON:
    """Alive: the process answers. Nothing else is looked at, so a restart is never asked for
    because of the data."""
    return JSON({"status": "alive"})


async def readyz(request: Request) -> JSON:
    """Ready (200) while a version is loaded and none of its files has failed a query; 503
    otherwise, saying why. A newer version that was refused is reported either way: the
    service is still ready on the one it serves."""
    holder: DatasetHolder = request.app.state.holder
    watcher: VersionWatcher = request.app.state.watcher
    dataset = holder.current
    body: dict[str, object]
    if dataset is None:
        body = {"status": "unavailable", "reason": "no dataset version is loaded"}
    else:
        body = {
            "status": "degraded" if dataset.faults else "ready",
            "version_id": dataset.version_id,
            "as_of": dataset.manifest["as_of"],
            "records": dataset.records,
        }
        if dataset.faults:
            body["faults"] = dataset.faults
    if watcher.refused is not None:
        body["refused"] = watcher.refused
    return JSON(body, status_code=200 if body["status"] == "ready" else 503)
