"""Where versions are published: a local data directory, or an S3 bucket and prefix, and the
`FEES_*` variables that say so (read with `setting`, as the service reads all of its own).

    s3://<bucket>/<prefix>/
        current                                  (an object whose body is the version id)
        versions/<version id>/...                (the files of the version, as on disk)

A version is always built on local disk (`ingest.publish`'s staging directory; for S3 one under
the system temp directory). On S3 every file of it is uploaded first, the manifest last, and only
then is `current` written, in one PUT: a reader sees the old version or the new one, never a mix,
and a run that dies while uploading leaves a prefix no pointer names (pruned later).

Only what differs between the two lives here (the pointer, the manifest, and S3's publishing
and pruning). The local protocol, and the lock every ingest takes, are `ingest.publish`'s: this
module is part of the dataset contract the service reads through, and loads no other module
of the ingest but `ingest.layout` (and through it `ingest.schema`). The S3 side takes its
endpoint from `FEES_S3_ENDPOINT_URL` (through the caller) and its credentials from the standard
AWS variables.
Unlike the local lock, the lock an S3 ingest takes is this machine's only: two machines must not
ingest into one prefix at once.
"""

import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ingest import layout

S3_SCHEME = "s3://"
DELETE_BATCH = 1000  # the most keys one DeleteObjects request takes


class InvalidSetting(ValueError):
    """A `FEES_*` setting that cannot be used; the message says which, its value and what is
    allowed."""


def setting(environ: Mapping[str, str], variable: str, parse: Callable[[str], Any]) -> Any:
    """A `FEES_*` variable's value as `parse` reads it; None when it is unset or empty. The data
    commands read FEES_DATA_DIR and FEES_S3_ENDPOINT_URL with it (`ingest.cli`), the service
    all its settings (`service.settings`)."""
    text = environ.get(variable, "").strip()
    if not text:
        return None
    try:
        return parse(text)
    except ValueError as error:
        raise InvalidSetting(f"{variable}={text!r}: {error}") from None


def is_s3(location: Path | str) -> bool:
    return isinstance(location, str) and location.startswith(S3_SCHEME)


def split_s3(url: str) -> tuple[str, str]:
    """The bucket and the prefix (no slash at either end) of `s3://bucket[/prefix]`."""
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
        raise ValueError("must be s3://bucket[/prefix]")
    return parts.netloc, parts.path.strip("/")


def location(text: str) -> Path | str:
    """A data location as given (`--data`, `FEES_DATA_DIR`): a directory, or
    `s3://bucket[/prefix]`."""
    if text.startswith("s3:"):
        split_s3(text)  # raises ValueError naming the allowed form
        return text
    return Path(text)


def has_valid_port(url: str) -> bool:
    try:
        urlsplit(url).port  # noqa: B018 (raises for a port that is not a number up to 65535)
    except ValueError:
        return False
    return True


def endpoint_url(text: str) -> str:
    """An S3-compatible endpoint (`FEES_S3_ENDPOINT_URL`)."""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname or not has_valid_port(text):
        raise ValueError("must be http(s)://host[:port] (an S3-compatible endpoint)")
    return text


@dataclass
class LocalStorage:
    root: Path  # the data directory itself; publishing to it is `ingest.publish`'s

    def current_version(self) -> str | None:
        current = layout.current_version_dir(self.root)
        return current.name if current is not None else None

    def manifest(self, version_id: str) -> dict[str, Any]:
        return layout.read_manifest(self.root / layout.VERSIONS / version_id)

    def previous_fees(self, version_id: str, work: Path) -> Path:
        return self.root / layout.VERSIONS / version_id / "fees"


@dataclass
class S3Storage:
    url: str
    endpoint_url: str | None = None
    bucket: str = field(init=False)
    prefix: str = field(init=False)
    root: Path = field(init=False)  # where versions are staged (and the local lock is)

    def __post_init__(self) -> None:
        self.bucket, self.prefix = split_s3(self.url)
        self.root = Path(tempfile.gettempdir()) / "fees-ingest" / self.bucket / self.prefix
        import boto3  # here, not at the top: loading it costs every local run 90 ms

        self._s3 = boto3.client("s3", endpoint_url=self.endpoint_url)

    def key(self, *parts: str) -> str:
        return "/".join(part for part in (self.prefix, *parts) if part)

    def current_version(self) -> str | None:
        body = self._get(self.key(layout.CURRENT))
        return body.decode("utf-8").strip() if body is not None else None

    def manifest(self, version_id: str) -> dict[str, Any]:
        body = self._get(self.key(layout.VERSIONS, version_id, layout.MANIFEST))
        if body is None:
            raise FileNotFoundError(f"{self.url}: version {version_id} has no manifest")
        manifest: dict[str, Any] = json.loads(body)
        return manifest

    def previous_fees(self, version_id: str, work: Path) -> Path:
        target = work / "previous"
        self.download(version_id, target, under="fees")
        return target / "fees"

    def publish(self, staged: Path, version_id: str) -> str:
        """Upload every file of the version (its manifest last), then move `current` to it."""
        files = sorted(path for path in staged.rglob("*") if path.is_file())
        files.sort(key=lambda path: path.name == layout.MANIFEST)  # stable: manifest last
        for path in files:
            key = self.key(layout.VERSIONS, version_id, path.relative_to(staged).as_posix())
            self._s3.upload_file(str(path), self.bucket, key)
        self._s3.put_object(
            Bucket=self.bucket, Key=self.key(layout.CURRENT), Body=version_id.encode("utf-8")
        )
        return self.key(layout.VERSIONS, version_id)

    def prune(self, *, keep: int) -> list[str]:
        """Delete all but the newest `keep` version prefixes; never the current one."""
        current = self.current_version()
        versions = sorted(self.versions(), reverse=True)
        doomed = [name for name in versions[keep:] if name != current]
        for name in doomed:
            keys = [{"Key": key} for key in self._keys(self.key(layout.VERSIONS, name) + "/")]
            for start in range(0, len(keys), DELETE_BATCH):
                self._s3.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": keys[start : start + DELETE_BATCH]}
                )
        return doomed

    def versions(self) -> list[str]:
        """The version ids with a prefix under `versions/`, complete or not."""
        prefix = self.key(layout.VERSIONS) + "/"
        pages = self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix, Delimiter="/"
        )
        return [
            common["Prefix"][len(prefix) :].rstrip("/")
            for page in pages
            for common in page.get("CommonPrefixes", [])
        ]

    def download(self, version_id: str, target: Path, *, under: str = "") -> None:
        """Every object of the version (or of its folder `under`) into `target`, as laid out."""
        prefix = self.key(layout.VERSIONS, version_id) + "/"
        for key in self._keys(prefix + (f"{under}/" if under else "")):
            path = target / key[len(prefix) :]
            path.parent.mkdir(parents=True, exist_ok=True)
            self._s3.download_file(self.bucket, key, str(path))

    def _keys(self, prefix: str) -> Iterator[str]:
        pages = self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        )
        for page in pages:
            for item in page.get("Contents", []):
                yield item["Key"]

    def _get(self, key: str) -> bytes | None:
        """The object's body, or None if there is no such object."""
        from botocore.exceptions import ClientError  # loaded with boto3 (`__post_init__`)

        try:
            response = self._s3.get_object(Bucket=self.bucket, Key=key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        body: bytes = response["Body"].read()
        return body


Storage = LocalStorage | S3Storage


def s3_errors() -> tuple[type[Exception], ...]:
    """botocore's errors, once an `S3Storage` has loaded it (nothing can raise them before)."""
    loaded = sys.modules.get("botocore.exceptions")
    return () if loaded is None else (loaded.BotoCoreError, loaded.ClientError)


def open_storage(location: Path | str, *, s3_endpoint_url: str | None = None) -> Storage:
    if is_s3(location):
        return S3Storage(str(location), s3_endpoint_url)
    return LocalStorage(Path(os.fspath(location)))
