import { DataType, DateUnit, Precision, makeData, type Data, type Field } from 'apache-arrow';
import type { AvroOp } from './avro/native-ops';
import { programOf } from './avro/native-ops';
import type { NativeProgram } from './compiled-reader';
import type { ProtobufValueOp } from './protobuf/native-ops';
import { protobufProgramOf } from './protobuf/native-ops';
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
 * The native readers of the registry formats (native/json-columns/src/avro.rs, protobuf.rs): a
 * writer's compiled reading (avro/ and protobuf/compiled-reader.ts, the reference, describe
 * themselves as a NativeProgram) run over a whole batch of its framed values at once, straight
 * into Arrow buffers. It takes exactly the records the compiled reader takes; the others come
 * back as rejected, for the TypeScript decoder.
 */
export class NativeRegistryColumns {
  private constructor(
    private readonly decoder: { decode(data: Uint8Array, spans: Uint32Array): NativeDecoded },
    private readonly types: readonly DataType[],
  ) {}

  /**
   * The reader of a writer's top-level fields into columns of `types` (each the column's Arrow
   * type, as its codec makes it), or undefined when the module is not built or a column's type
   * is not the one the program writes there.
   */
  static for(
    native: NativeProgram,
    types: readonly DataType[],
    module = nativeJsonModule(),
  ): NativeRegistryColumns | undefined {
    if (native.format === 'avro') {
      const ops = native.fields;
      if (!module?.AvroColumns || ops.length !== types.length) return undefined;
      if (!ops.every((op, i) => writes(op, types[i]!))) return undefined;
      const { program, symbols } = programOf(ops);
      return new NativeRegistryColumns(new module.AvroColumns(program, symbols), types);
    }
    const fields = native.message.fields;
    if (!module?.ProtobufColumns || fields.length !== types.length) return undefined;
    if (!fields.every((f, i) => writesProtobuf(f.value, types[i]!))) return undefined;
    const { program, symbols } = protobufProgramOf(native.message);
    return new NativeRegistryColumns(new module.ProtobufColumns(program, symbols, [...native.prefix]), types);
  }

  /** Decodes the framed values of `messages` (none null). */
  decode(messages: readonly RawMessage[]): NativeColumns {
    const { data, spans } = spansOf(messages);
    const decoded = this.decoder.decode(data, spans);
    let next = 0;
    const take = (): ColumnBuffers => {
      const c = decoded.columns[next++];
      if (c === undefined) throw new Error('the native reader returned fewer columns than its fields');
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

const isInt = (type: DataType, bits: 32 | 64, signed: boolean) =>
  DataType.isInt(type) && type.bitWidth === bits && type.isSigned === signed;

/** Whether a Protobuf field of `op` writes the buffers of a column of `type` (protobuf.rs's Kind.out). */
function writesProtobuf(op: ProtobufValueOp, type: DataType): boolean {
  switch (op.kind) {
    case 'int32':
    case 'sint32':
    case 'sfixed32':
      return isInt(type, 32, true);
    case 'uint32':
    case 'fixed32':
      return isInt(type, 32, false);
    case 'int64':
    case 'sint64':
    case 'sfixed64':
    case 'duration':
      return isInt(type, 64, true);
    case 'uint64':
    case 'fixed64':
      return isInt(type, 64, false);
    case 'timestamp':
      return DataType.isTimestamp(type);
    case 'bool':
      return DataType.isBool(type);
    case 'double':
      return DataType.isFloat(type) && type.precision === Precision.DOUBLE;
    case 'float':
      return DataType.isFloat(type) && type.precision === Precision.SINGLE;
    case 'string':
    case 'enum':
      return DataType.isUtf8(type);
    case 'bytes':
      return DataType.isBinary(type);
    case 'message': {
      if (!DataType.isStruct(type)) return false;
      const fields: readonly Field<DataType>[] = type.children;
      const ops = op.message.fields;
      return fields.length === ops.length && ops.every((f, i) => writesProtobuf(f.value, fields[i]!.type));
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
  const array = fixedArrayOf(type);
  const data = aligned(c.data, array.BYTES_PER_ELEMENT);
  return makeData({ ...header, type, data: new array(data.buffer, data.byteOffset, length) } as never);
}

/** A typed array over a fixed-width column's values. */
interface FixedArray {
  readonly BYTES_PER_ELEMENT: number;
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): ArrayBufferView;
}

/** The typed array a fixed-width column of `type` holds (what `writes` and `writesProtobuf` let through). */
function fixedArrayOf(type: DataType): FixedArray {
  if (DataType.isFloat(type)) return type.precision === Precision.SINGLE ? Float32Array : Float64Array;
  if (isInt(type, 32, false)) return Uint32Array;
  if (DataType.isDate(type) || isInt(type, 32, true)) return Int32Array;
  if (isInt(type, 64, false)) return BigUint64Array;
  return BigInt64Array; // Int64 and Timestamp
}
