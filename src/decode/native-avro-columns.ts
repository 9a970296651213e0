import { DataType, DateUnit, Precision, makeData, type Data, type Field } from 'apache-arrow';
import type { AvroOp } from './avro/native-ops';
import { programOf } from './avro/native-ops';
import {
  aligned,
  nativeJsonModule,
  spansOf,
  type ColumnBuffers,
  type NativeColumns,
  type NativeDecoded,
} from './native-json-columns';
import type { RawMessage } from './raw-message';

/**
 * The native Avro reader (native/json-columns/src/avro.rs): a writer schema's compiled reading
 * (avro/compiled-reader.ts, the reference, describes itself as ops) run over a whole batch of its
 * framed values at once, straight into Arrow buffers. It takes exactly the records the compiled
 * reader takes; the others come back as rejected, for the TypeScript decoder.
 */
export class NativeAvroColumns {
  private constructor(
    private readonly decoder: { decode(data: Uint8Array, spans: Uint32Array): NativeDecoded },
    private readonly types: readonly DataType[],
  ) {}

  /**
   * The reader of a writer's top-level fields `ops` into columns of `types` (each the column's
   * Arrow type, as its codec makes it), or undefined when the module is not built or a column's
   * type is not the one the op writes.
   */
  static for(
    ops: readonly AvroOp[],
    types: readonly DataType[],
    module = nativeJsonModule(),
  ): NativeAvroColumns | undefined {
    if (!module?.AvroColumns || ops.length !== types.length) return undefined;
    if (!ops.every((op, i) => writes(op, types[i]!))) return undefined;
    const { program, symbols } = programOf(ops);
    return new NativeAvroColumns(new module.AvroColumns(program, symbols), types);
  }

  /** Decodes the framed values of `messages` (none null). */
  decode(messages: readonly RawMessage[]): NativeColumns {
    const { data, spans } = spansOf(messages);
    const decoded = this.decoder.decode(data, spans);
    let next = 0;
    const take = (): ColumnBuffers => {
      const c = decoded.columns[next++];
      if (c === undefined) throw new Error('the native Avro reader returned fewer columns than its fields');
      return c;
    };
    const children = this.types.map((t) => dataOf(t, decoded.rows, take));
    return { rows: decoded.rows, rejected: decoded.rejected, children };
  }
}

/** Whether `op` writes the buffers of a column of `type` (avro.rs's Out for it). */
function writes(op: AvroOp, type: DataType): boolean {
  switch (op.kind) {
    case 'optional':
      return writes(op.inner, type);
    case 'bool':
      return DataType.isBool(type);
    case 'int':
      return (
        (DataType.isInt(type) && type.bitWidth === 32 && type.isSigned) ||
        (DataType.isDate(type) && type.unit === DateUnit.DAY)
      );
    case 'long':
      return (DataType.isInt(type) && type.bitWidth === 64 && type.isSigned) || DataType.isTimestamp(type);
    case 'float32':
      return DataType.isFloat(type) && type.precision === Precision.SINGLE;
    case 'float64':
      return DataType.isFloat(type) && type.precision === Precision.DOUBLE;
    case 'bytes':
      return op.utf8 ? DataType.isUtf8(type) : DataType.isBinary(type);
    case 'enum':
      return DataType.isUtf8(type);
    case 'fixed':
      return DataType.isBinary(type);
    case 'record': {
      if (!DataType.isStruct(type)) return false;
      const fields: readonly Field<DataType>[] = type.children;
      return fields.length === op.children.length && op.children.every((c, i) => writes(c, fields[i]!.type));
    }
  }
}

/** A column of `type` from the native buffers, depth first (a struct's own, then its fields'). */
function dataOf(type: DataType, length: number, take: () => ColumnBuffers): Data {
  const c = take();
  const header = { length, nullCount: c.nullCount, nullBitmap: c.validity ?? undefined };
  if (DataType.isStruct(type)) {
    const fields: readonly Field<DataType>[] = type.children;
    const children = fields.map((f) => dataOf(f.type, length, take));
    return makeData({ ...header, type, children });
  }
  if (DataType.isUtf8(type) || DataType.isBinary(type)) {
    const offsets = aligned(c.offsets!, 4);
    return makeData({
      ...header,
      type,
      valueOffsets: new Int32Array(offsets.buffer, offsets.byteOffset, length + 1),
      data: aligned(c.data, 1),
    } as never);
  }
  if (DataType.isBool(type)) return makeData({ ...header, type, data: aligned(c.data, 1) });
  if (DataType.isFloat(type) && type.precision === Precision.SINGLE) {
    const data = aligned(c.data, 4);
    return makeData({
      ...header,
      type,
      data: new Float32Array(data.buffer, data.byteOffset, length),
    } as never);
  }
  if (DataType.isFloat(type)) {
    const data = aligned(c.data, 8);
    return makeData({
      ...header,
      type,
      data: new Float64Array(data.buffer, data.byteOffset, length),
    } as never);
  }
  if (DataType.isDate(type) || (DataType.isInt(type) && type.bitWidth === 32)) {
    const data = aligned(c.data, 4);
    return makeData({ ...header, type, data: new Int32Array(data.buffer, data.byteOffset, length) } as never);
  }
  // Int64 and Timestamp: what `writes` let through.
  const data = aligned(c.data, 8);
  return makeData({
    ...header,
    type,
    data: new BigInt64Array(data.buffer, data.byteOffset, length),
  } as never);
}
