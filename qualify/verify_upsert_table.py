"""The independent reader of an upsert table (the qualification's `cdc` step).

Opens a Lance dataset written by kafka-lance in upsert mode with the Python `pylance`
package, not through LanceDB, and prints as JSON on stdout the rows a reader sees
(`_deleted = false`), sorted by the key column, with the given columns, and the keys held
by more than one such row.

  verify_upsert_table.py --dataset <path>/<table>.lance --key id --columns id,name,note
"""

import argparse
import json
import sys

import lance


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--columns", required=True)
    args = parser.parse_args()
    columns = args.columns.split(",")
    dataset = lance.dataset(args.dataset)
    table = dataset.to_table(columns=columns, filter="_deleted = false")
    rows = sorted(table.to_pylist(), key=lambda r: r[args.key])
    seen = {}
    for r in rows:
        seen[r[args.key]] = seen.get(r[args.key], 0) + 1
    duplicated = sorted(k for k, n in seen.items() if n > 1)
    json.dump(
        {"version": dataset.version, "rows": rows, "duplicated": duplicated, "all_rows": dataset.count_rows()},
        sys.stdout,
        default=str,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
