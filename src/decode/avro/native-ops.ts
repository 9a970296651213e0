/**
 * A compiled Avro reader's nodes as the native reader takes them (native/json-columns/src/avro.rs):
 * each the same reading as its compiled-reader.ts node, which stays the reference. A node with
 * no op here (decimals, arrays, maps) keeps its writer schema on the compiled reader.
 */
export type AvroOp =
  | { readonly kind: 'bool' }
  /** An exact varint within [min, max], into Int32 (int, date). */
  | { readonly kind: 'int'; readonly min: number; readonly max: number }
  /** An exact varint within [min, max], into Int64 (long, timestamp); `big`: 9 or 10 bytes too, any int64. */
  | { readonly kind: 'long'; readonly big: boolean; readonly min: number; readonly max: number }
  | { readonly kind: 'float32' }
  | { readonly kind: 'float64' }
  /** A length and its bytes: `utf8` (well-formed) into Utf8, else into Binary. */
  | { readonly kind: 'bytes'; readonly utf8: boolean }
  | { readonly kind: 'enum'; readonly symbols: readonly string[] }
  | { readonly kind: 'fixed'; readonly size: number }
  /** A union of null and one type; `nullIndex` -1 when no branch is null. */
  | {
      readonly kind: 'optional';
      readonly nullIndex: number;
      readonly valueIndex: number;
      readonly inner: AvroOp;
    }
  | { readonly kind: 'record'; readonly children: readonly AvroOp[] };

/** The codes of avro.rs's `op` module. */
const CODES = {
  bool: 0,
  int: 1,
  long: 2,
  float32: 3,
  float64: 4,
  string: 5,
  bytes: 6,
  enum: 7,
  fixed: 8,
  optional: 9,
  record: 10,
} as const;

/** A record's ops as avro.rs parses them: preorder codes, and the enums' symbols in one list. */
export function programOf(fields: readonly AvroOp[]): { program: number[]; symbols: string[] } {
  const program: number[] = [];
  const symbols: string[] = [];
  const write = (op: AvroOp): void => {
    switch (op.kind) {
      case 'bool':
      case 'float32':
      case 'float64':
        program.push(CODES[op.kind]);
        return;
      case 'int':
        program.push(CODES.int, op.min, op.max);
        return;
      case 'long':
        program.push(CODES.long, op.big ? 1 : 0, op.min, op.max);
        return;
      case 'bytes':
        program.push(op.utf8 ? CODES.string : CODES.bytes);
        return;
      case 'enum':
        program.push(CODES.enum, symbols.length, op.symbols.length);
        symbols.push(...op.symbols);
        return;
      case 'fixed':
        program.push(CODES.fixed, op.size);
        return;
      case 'optional':
        program.push(CODES.optional, op.nullIndex, op.valueIndex);
        write(op.inner);
        return;
      case 'record':
        program.push(CODES.record, op.children.length);
        op.children.forEach(write);
        return;
    }
  };
  write({ kind: 'record', children: fields });
  return { program, symbols };
}
