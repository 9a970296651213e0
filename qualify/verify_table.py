"""The independent reader of the qualification campaign (a second reader of the table).

Opens a Lance dataset written by kafka-lance (LanceDB for Node) with the Python
`pylance` package, not through LanceDB, and reports as JSON on stdout:
  rows, version, per-partition counts and offset bounds, duplicate
  (_topic, _partition, _offset) triples, and rows whose `sha` is not the SHA-256 of
  their `payload` (rows without those columns are not checksummed).

With --expected FILE (JSON {"<partition>": [offsets]}: the rows a log with gaps must
give, exactly), it also reports the expected rows absent from the table ("missing") and
the rows at offsets the file does not list ("unexpected").

With --by-topic-id (a topic deleted and recreated under its name: offsets repeat, one
incarnation per `_topic_id`), rows are keyed (_topic, _partition, _offset, _topic_id),
duplicates counted per incarnation, and the --expected file's keys are
"<topic id>/<partition>".

  verify_table.py --dataset <path or s3://.../table.lance> [--storage-options JSON] [--topic T]
                  [--expected FILE] [--by-topic-id]
"""

import argparse
import hashlib
import json
import sys

import lance


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--storage-options", default="{}")
    parser.add_argument("--topic", default=None)
    parser.add_argument("--expected", default=None)
    parser.add_argument("--by-topic-id", action="store_true")
    args = parser.parse_args()
    by_id = args.by_topic_id
    expected = None
    if args.expected is not None:
        with open(args.expected, encoding="utf-8") as f:
            expected = {(p if by_id else int(p)): set(offsets) for p, offsets in json.load(f).items()}
    found = {}
    unexpected = []
    unexpected_count = 0
    options = json.loads(args.storage_options)
    ds = lance.dataset(args.dataset, storage_options=options or None)
    names = set(ds.schema.names)
    checksummed = {"payload", "sha"} <= names
    columns = (
        ["_topic", "_partition", "_offset"]
        + (["_topic_id"] if by_id else [])
        + (["payload", "sha"] if checksummed else [])
    )

    seen = set()
    duplicates = []
    duplicate_count = 0
    mismatches = []
    mismatch_count = 0
    partitions = {}
    rows = 0
    for batch in ds.to_batches(columns=columns, batch_size=8192):
        data = batch.to_pydict()
        for i in range(batch.num_rows):
            topic = data["_topic"][i]
            if args.topic is not None and topic != args.topic:
                continue
            rows += 1
            key = (topic, data["_partition"][i], data["_offset"][i])
            group = key[1]
            if by_id:
                key = key + (data["_topic_id"][i],)
                group = f"{key[3]}/{key[1]}"
            if key in seen:
                duplicate_count += 1
                if len(duplicates) < 20:
                    duplicates.append(list(key))
            else:
                seen.add(key)
            if expected is not None:
                found.setdefault(group, set()).add(key[2])
                if key[2] not in expected.get(group, ()):
                    unexpected_count += 1
                    if len(unexpected) < 20:
                        unexpected.append([group, key[2]])
            p = partitions.setdefault(str(group), {"rows": 0, "minOffset": key[2], "maxOffset": key[2]})
            p["rows"] += 1
            p["minOffset"] = min(p["minOffset"], key[2])
            p["maxOffset"] = max(p["maxOffset"], key[2])
            if checksummed:
                payload = data["payload"][i]
                if payload is None or hashlib.sha256(payload.encode("utf-8")).hexdigest() != data["sha"][i]:
                    mismatch_count += 1
                    if len(mismatches) < 20:
                        mismatches.append(list(key))

    extra = {}
    if expected is not None:
        missing = []
        missing_count = 0
        for p in sorted(expected):
            have = found.get(p, set())
            for o in sorted(expected[p] - have):
                missing_count += 1
                if len(missing) < 20:
                    missing.append([p, o])
        extra = {
            "missing": missing_count,
            "missingExamples": missing,
            "unexpected": unexpected_count,
            "unexpectedExamples": unexpected,
        }

    json.dump(
        {
            "reader": f"pylance {lance.__version__}",
            "dataset": args.dataset,
            "version": ds.version,
            "rows": rows,
            "distinct": len(seen),
            "duplicates": duplicate_count,
            "duplicateExamples": duplicates,
            "checksummed": checksummed,
            "checksumMismatches": mismatch_count,
            "mismatchExamples": mismatches,
            "partitions": partitions,
            **extra,
        },
        sys.stdout,
    )
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
