"""The independent reader of many tables at once (the routing step: one table per topic).

Opens each Lance dataset written by kafka-lance with the Python `pylance` package, not
through LanceDB, in one process (one interpreter start for fifty tables), and reports
as JSON on stdout, per dataset: rows, rows per `_topic` (a row of another topic in a
table is a routing error), duplicate (_topic, _partition, _offset, _topic_id) keys, and
rows whose `sha` is not the SHA-256 of their `payload`.

  verify_tables.py --datasets JSON   (a list of paths, <uri>/<table>.lance)
"""

import argparse
import hashlib
import json
import os
import sys

import lance


def read(path: str) -> dict:
    if not os.path.exists(path):
        return {"dataset": path, "exists": False, "rows": 0, "byTopic": {}, "duplicates": 0,
                "duplicateExamples": [], "checksumMismatches": 0}
    ds = lance.dataset(path)
    seen = set()
    by_topic = {}
    duplicates = []
    duplicate_count = 0
    mismatch_count = 0
    rows = 0
    columns = ["_topic", "_partition", "_offset", "_topic_id", "payload", "sha"]
    for batch in ds.to_batches(columns=columns, batch_size=8192):
        data = batch.to_pydict()
        for i in range(batch.num_rows):
            rows += 1
            key = (data["_topic"][i], data["_partition"][i], data["_offset"][i], data["_topic_id"][i])
            by_topic[key[0]] = by_topic.get(key[0], 0) + 1
            if key in seen:
                duplicate_count += 1
                if len(duplicates) < 10:
                    duplicates.append(list(key))
            else:
                seen.add(key)
            payload = data["payload"][i]
            if payload is None or hashlib.sha256(payload.encode("utf-8")).hexdigest() != data["sha"][i]:
                mismatch_count += 1
    return {
        "dataset": path,
        "exists": True,
        "version": ds.version,
        "rows": rows,
        "byTopic": by_topic,
        "duplicates": duplicate_count,
        "duplicateExamples": duplicates,
        "checksumMismatches": mismatch_count,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--datasets", required=True)
    args = parser.parse_args()
    json.dump({"reader": f"pylance {lance.__version__}", "tables": [read(p) for p in json.loads(args.datasets)]},
              sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
