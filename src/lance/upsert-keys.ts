import { DataType, type Vector } from 'apache-arrow';

/**
 * An upsert table's keys as the merge tells them apart (docs/design/upserts.md): a key
 * column's values read exactly as stored (a position's integer columns are read the same
 * way), and one key's identity as a string, by which a publication's rows and the table's
 * are matched.
 */

/**
 * One key's identity as a string: each key column's value tagged with its kind, so that
 * the integer 1 and the text "1" are different keys, and a composite key's parts cannot
 * run into each other. Only rows of one table (one type per column) are compared.
 */
export function keyIdentity(values: readonly unknown[]): string {
  return JSON.stringify(
    values.map((v): [string, string | number | boolean | null] => {
      if (v === null || v === undefined) return ['null', null];
      if (typeof v === 'bigint') return ['int', v.toString()];
      if (typeof v === 'string') return ['str', v];
      if (typeof v === 'number') return ['num', v];
      if (typeof v === 'boolean') return ['bool', v];
      if (v instanceof Uint8Array)
        return ['bytes', Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex')];
      if (v instanceof Date) return ['time', v.getTime()];
      // Not a key column's type (config/upsert-options.ts refuses the rest): by its JSON text.
      return ['other', JSON.stringify(v) ?? ''];
    }),
  );
}

/**
 * A key column's values by row, exactly as stored. apache-arrow's `get` gives a Timestamp
 * or a Date as a float of milliseconds, so nanosecond (or microsecond) keys a nanosecond
 * apart would be one key and all but one of them dropped: those, and 64-bit integers, are
 * read from their buffers as the stored integer (bigint).
 */
export function keyValues(column: Vector): (row: number) => unknown {
  const type = column.type as DataType;
  const integral =
    DataType.isTimestamp(type) ||
    DataType.isDate(type) ||
    DataType.isTime(type) ||
    (DataType.isInt(type) && type.bitWidth === 64);
  if (!integral) return (row) => column.get(row) as unknown;
  const chunks = column.data;
  return (row) => {
    let local = row;
    for (const chunk of chunks) {
      if (local < chunk.length) {
        if (!chunk.getValid(local)) return null;
        // Data.slice slices the values buffer too: the chunk's row i is at index i.
        return BigInt((chunk.values as BigInt64Array | Int32Array)[local]!);
      }
      local -= chunk.length;
    }
    return null;
  };
}
