"""Raw fee CSVs to validated, versioned, hive-partitioned Parquet.

`ingest.pipeline.run_ingest` is the whole job; `python -m ingest` is its command line.
"""
