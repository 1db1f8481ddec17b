"""The rollups an ingest writes belong to its version, and no other version's are ever used."""

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ingest.layout import DISCOVERY_GROUPS, ROLLUP_DIR, VERSION_KEY
from ingest.pipeline import IngestResult
from ingest.rollups import ROLLUPS
from service.dataset.rollups import RollupMismatch
from service.dataset.version import Dataset
from service.settings import Settings

STAMPED = (*ROLLUPS, DISCOVERY_GROUPS)
# What the service reads: `counts` only for analysts, its search (`DISCOVERY_GROUPS` and the
# arrays) in its place.
READ = tuple(name for name in STAMPED if name != "counts")


def test_every_rollup_carries_its_version_id(fixture_version: IngestResult) -> None:
    for name in STAMPED:
        schema = pq.read_schema(fixture_version.version_dir / ROLLUP_DIR / f"{name}.parquet")
        assert (schema.metadata or {})[VERSION_KEY] == fixture_version.version_id.encode()


@pytest.mark.parametrize("name", READ)
def test_a_rollup_of_another_version_is_refused(
    fixture_version: IngestResult, tmp_path: Path, name: str
) -> None:
    copy = Path(shutil.copytree(fixture_version.version_dir, tmp_path / "version"))
    path = copy / ROLLUP_DIR / f"{name}.parquet"
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({VERSION_KEY: b"20200101T000000Z-other"}), path)
    with pytest.raises(RollupMismatch, match="20200101T000000Z-other"):
        Dataset(copy, Settings(data_dir=tmp_path))


def test_a_rollup_with_no_version_is_refused(fixture_version: IngestResult, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(fixture_version.version_dir, tmp_path / "version"))
    path = copy / ROLLUP_DIR / f"{DISCOVERY_GROUPS}.parquet"
    pq.write_table(pq.read_table(path).replace_schema_metadata({}), path)
    with pytest.raises(RollupMismatch, match="no version"):
        Dataset(copy, Settings(data_dir=tmp_path))
