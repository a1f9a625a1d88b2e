"""Ingest task and trajectory records into the store, one file as one unit of work.

Formats: JSON lines (``.jsonl``/``.ndjson``), a JSON file of one array, Parquet (``.parquet``), and a
``datasets`` dataset saved with ``save_to_disk`` (a directory). Read in this order:

- ``sources`` (step 0): every format, and in-memory records, becomes one *source* relation: the record fields
  plus ``_line`` (the line of a JSON-lines file, the 1-based row of the others);
- ``staging`` (steps 1-3): the source's columns are checked against the record format (unknown fields, wrong
  types), staged with the store's column types, and value-checked in SQL; the first failing record is reported
  by file, line/row and field;
- ``mirror`` and ``checks`` (step 4): the stored rows the checks can meet are copied to the private connection,
  and ids and content hashes are resolved and checked against them;
- ``writes`` (step 5): the new records are inserted, inside one transaction with the ``ingests`` row that
  records the file; ``remove_ingested`` undoes the ingests a label names. Every write to ``tasks``,
  ``trajectories`` and ``ingests`` is there.

``unit`` runs the steps as one unit of work. Steps 0-4 run on a private in-memory DuckDB; only step 5 needs the
store's lock, and it first rechecks whatever another writer ingested since the mirror was read.
``ingest_file`` and ``ingest_records`` work in a store the caller holds open; ``ingest_opened`` opens it through
the caller's opener, for the read and again for step 5 alone (the store's ``ingest_path`` opens it by path so,
holding its lock only to insert). Any failure leaves the store exactly as it was. The ingest needs only an open
store's connection, transaction and mode (``OpenStore``): the store module builds on it, not the other way round.
"""

from coevolve_engine.core.ingest.sources import FORMATS, detect_format
from coevolve_engine.core.ingest.unit import IngestReport, ingest_file, ingest_opened, ingest_records
from coevolve_engine.core.ingest.writes import OpenStore, remove_ingested

__all__ = ["FORMATS", "IngestReport", "OpenStore", "detect_format", "ingest_file", "ingest_opened", "ingest_records",
           "remove_ingested"]
