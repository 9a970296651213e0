"""Reads a Lance dataset with pylance (not LanceDB) and prints its columns as JSON.

For the declared-types round trip (test/lance/declared-schema.test.ts): every
value is written so that a test can compare it exactly with what was sent:
  - timestamps and dates as their stored integers (epoch units, days), not datetimes;
  - decimals as their exact decimal text; binary as base64; float16 as float;
  - lists as arrays, structs as objects, nulls as null.

  dump_columns.py --dataset <path>/<table>.lance
Prints {"types": {column: arrow type}, "rows": [{column: value}, ...]}, rows sorted by _offset.
"""

import argparse
import base64
import decimal
import json
import sys

import lance
import pyarrow as pa
import pyarrow.compute as pc


def plain(array: pa.Array):
    """An Arrow array as JSON-able Python values, exact."""
    t = array.type
    if pa.types.is_timestamp(t) or pa.types.is_date32(t):
        return array.cast(pa.int64() if pa.types.is_timestamp(t) else pa.int32()).to_pylist()
    valid = [array[i].is_valid for i in range(len(array))]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        # values ignores the array's slice offset; offsets are absolute positions into it.
        offsets = array.offsets.to_pylist()
        values = plain(array.values)
        return [values[offsets[i] : offsets[i + 1]] if valid[i] else None for i in range(len(array))]
    if pa.types.is_fixed_size_list(t):
        size, base = t.list_size, array.offset
        values = plain(array.values)
        return [
            values[(base + i) * size : (base + i + 1) * size] if valid[i] else None for i in range(len(array))
        ]
    if pa.types.is_struct(t):
        # flatten applies the struct's slice offset to each child.
        children = {t.field(i).name: plain(child) for i, child in enumerate(array.flatten())}
        return [
            {name: values[i] for name, values in children.items()} if valid[i] else None
            for i in range(len(array))
        ]
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return [None if v is None else base64.b64encode(v).decode() for v in array.to_pylist()]
    if pa.types.is_decimal(t):
        return [None if v is None else str(v) for v in array.to_pylist()]
    if pa.types.is_float16(t):
        return [None if v is None else float(v) for v in array.to_pylist()]
    if pa.types.is_uint64(t) or pa.types.is_int64(t):
        return [None if v is None else str(v) for v in array.to_pylist()]
    return array.to_pylist()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", required=True)
    args = parser.parse_args()
    table = lance.dataset(args.dataset).to_table()
    table = table.take(pc.sort_indices(table["_offset"]))
    columns = {name: plain(table[name].combine_chunks()) for name in table.column_names}
    rows = [{name: columns[name][i] for name in columns} for i in range(table.num_rows)]
    types = {f.name: str(f.type) for f in table.schema}
    json.dump({"types": types, "rows": rows}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
