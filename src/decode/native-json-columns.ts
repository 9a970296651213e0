import * as path from 'node:path';
import {
  Bool,
  Field,
  Float32,
  Float64,
  FixedSizeList,
  Int32,
  Int64,
  TimeUnit,
  Timestamp,
  Utf8,
  makeData,
  type Data,
} from 'apache-arrow';
import { ROOT } from '../common/repo-root';
import type { EpochUnit } from '../config';
import { FIELD_CODECS, type InferredTypeName } from './field-codec';
import type { FieldState } from './field-state';
import type { RawMessage } from './raw-message';

/**
 * The native JSON decoder (native/json-columns, Rust through N-API), built by
 * `npm run build` when cargo is on the machine. It reads a batch's JSON values straight
 * into Arrow column buffers, without a JavaScript object per record, and takes only the
 * records it reads exactly as the TypeScript decoder would; the rest come back as
 * rejected, for that decoder to decide. Without the built module, or with
 * `KAFKA_LANCE_NATIVE_JSON=off`, every record takes the TypeScript decoder.
 */
export const NATIVE_MODULE_PATH = path.join(ROOT, 'native', 'json-columns', 'json-columns.node');

/** One column's buffers as the native module returns them. */
export interface ColumnBuffers {
  readonly data: Buffer;
  readonly offsets: Buffer | null | undefined;
  readonly validity: Buffer | null | undefined;
  readonly nullCount: number;
}

/** A batch as the native module returns it. */
export interface NativeDecoded {
  readonly rows: number;
  readonly rejected: readonly number[];
  readonly columns: readonly ColumnBuffers[];
}

interface NativeDecoder {
  decode(data: Uint8Array, spans: Uint32Array): NativeDecoded;
}

export interface NativeModule {
  readonly JsonColumns: new (
    names: string[],
    kinds: number[],
    nullable: boolean[],
    units: number[],
    eventTime: number,
    dims?: number[],
  ) => NativeDecoder;
  /** The registry formats' readers (native-registry-columns.ts): a program and its enums' symbols. */
  readonly AvroColumns?: new (program: number[], symbols: string[]) => NativeDecoder;
  /** `prefix`: the bytes of the values' message-index list. */
  readonly ProtobufColumns?: new (program: number[], symbols: string[], prefix: number[]) => NativeDecoder;
}

/** The kinds' codes in native/json-columns/src/fields.rs (a float32 vector is 7). */
const KINDS: readonly InferredTypeName[] = [
  'string',
  'int32',
  'int64',
  'float64',
  'boolean',
  'timestamp',
  'json',
];
const VECTOR_F32 = 7;
const UNITS: readonly EpochUnit[] = ['s', 'ms', 'us', 'ns'];

/** A column the native decoder writes: one of the scalar kinds, or a float32 vector of `dim`. */
type NativeKind = InferredTypeName | { readonly vector: number };

/** `vector<float32>[768]` (typed-codecs.ts's label) → 768. */
function float32VectorDim(field: FieldState): number | undefined {
  const m = /^vector<float32>\[(\d+)\]$/.exec(field.label);
  return m ? Number(m[1]) : undefined;
}

let loaded: NativeModule | null | undefined;

/**
 * The built module, or undefined (not built, or turned off: `KAFKA_LANCE_NATIVE_JSON=off` turns
 * off its Avro reader too). Loaded once per thread.
 */
export function nativeJsonModule(): NativeModule | undefined {
  if (loaded === undefined) {
    loaded = null;
    if (process.env.KAFKA_LANCE_NATIVE_JSON !== 'off') {
      try {
        const module = { exports: {} };
        process.dlopen(module, NATIVE_MODULE_PATH);
        loaded = module.exports as NativeModule;
      } catch {
        // Not built here (no cargo): the TypeScript decoder reads every record.
      }
    }
  }
  return loaded ?? undefined;
}

/** What the native decoder made of a batch's candidate records. */
export interface NativeColumns {
  readonly rows: number;
  /** Indices into the candidates, ascending: the records it left to the TypeScript decoder. */
  readonly rejected: readonly number[];
  /** One per declared field, in field order. */
  readonly children: Data[];
}

/**
 * A consumer's declared fields, when the native decoder can take all of them: seven
 * scalar types (string, int32, int64, float64, boolean, millisecond timestamp, json) and
 * float32 vectors (base64 or a JSON array, written straight into the FixedSizeList's
 * child buffer: no JavaScript number per element), names no plain object inherits (a missing "constructor" key reads as a function in
 * the TypeScript decoder), and an event-time field, if any, that is one of its
 * timestamp fields. Anything else (other vectors, decimals, nested types, keys, transforms,
 * registry formats, inference) keeps the TypeScript decoder for the whole consumer.
 */
export class NativeJsonColumns {
  readonly #decoder: NativeDecoder;
  readonly #kinds: readonly NativeKind[];

  private constructor(decoder: NativeDecoder, kinds: readonly NativeKind[]) {
    this.#decoder = decoder;
    this.#kinds = kinds;
  }

  static for(
    fields: readonly FieldState[],
    eventTimeField: string | undefined,
    module: NativeModule | undefined = nativeJsonModule(),
  ): NativeJsonColumns | undefined {
    if (!module || fields.length === 0) return undefined;
    const kinds: NativeKind[] = [];
    for (const field of fields) {
      const dim = float32VectorDim(field);
      const kind = dim !== undefined ? { vector: dim } : KINDS.find((k) => FIELD_CODECS[k] === field.codec);
      if (kind === undefined || field.name in Object.prototype) return undefined;
      kinds.push(kind);
    }
    const eventTime = eventTimeField === undefined ? -1 : fields.findIndex((f) => f.name === eventTimeField);
    if (eventTimeField !== undefined && kinds[eventTime] !== 'timestamp') return undefined;
    const decoder = new module.JsonColumns(
      fields.map((f) => f.name),
      kinds.map((k) => (typeof k === 'string' ? KINDS.indexOf(k) : VECTOR_F32)),
      fields.map((f) => f.nullable),
      fields.map((f) => UNITS.indexOf(f.epochUnit)),
      eventTime,
      kinds.map((k) => (typeof k === 'string' ? 0 : k.vector)),
    );
    return new NativeJsonColumns(decoder, kinds);
  }

  /** Decodes the values of `messages` (none null). */
  decode(messages: readonly RawMessage[]): NativeColumns {
    const { data, spans } = spansOf(messages);
    const decoded = this.#decoder.decode(data, spans);
    const children = decoded.columns.map((c, i) => columnData(this.#kinds[i]!, decoded.rows, c));
    return { rows: decoded.rows, rejected: decoded.rejected, children };
  }
}

/**
 * The values as (start, length) pairs into one byte array: the staging worker's
 * messages are views into one transferred buffer, read in place; others are copied together.
 */
export function spansOf(messages: readonly RawMessage[]): { data: Uint8Array; spans: Uint32Array } {
  const spans = new Uint32Array(messages.length * 2);
  const shared = messages[0]?.value?.buffer;
  if (shared !== undefined && messages.every((m) => m.value!.buffer === shared)) {
    messages.forEach((m, i) => {
      spans[i * 2] = m.value!.byteOffset;
      spans[i * 2 + 1] = m.value!.byteLength;
    });
    return { data: new Uint8Array(shared), spans };
  }
  let position = 0;
  messages.forEach((m, i) => {
    spans[i * 2] = position;
    spans[i * 2 + 1] = m.value!.byteLength;
    position += m.value!.byteLength;
  });
  return { data: Buffer.concat(messages.map((m) => m.value!)), spans };
}

/** A view of `bytes` whose offset suits `width`-byte values (copied when it does not). */
export function aligned(bytes: Buffer, width: number): Uint8Array {
  const view = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return bytes.byteOffset % width === 0 ? view : view.slice();
}

function columnData(kind: NativeKind, length: number, c: ColumnBuffers): Data {
  const header = { length, nullCount: c.nullCount, nullBitmap: c.validity ?? undefined };
  if (typeof kind !== 'string') {
    // As vector-codec.ts's builder makes it: the child "item", nullable, with no nulls.
    const data = aligned(c.data, 4);
    const values = makeData({
      type: new Float32(),
      length: length * kind.vector,
      nullCount: 0,
      data: new Float32Array(data.buffer, data.byteOffset, length * kind.vector),
    });
    const type = new FixedSizeList(kind.vector, new Field('item', new Float32(), true));
    return makeData({ ...header, type, child: values });
  }
  switch (kind) {
    case 'string':
    case 'json': {
      const offsets = aligned(c.offsets!, 4);
      return makeData({
        ...header,
        type: new Utf8(),
        valueOffsets: new Int32Array(offsets.buffer, offsets.byteOffset, length + 1),
        data: aligned(c.data, 1),
      });
    }
    case 'boolean':
      return makeData({ ...header, type: new Bool(), data: aligned(c.data, 1) });
    case 'int32': {
      const data = aligned(c.data, 4);
      return makeData({
        ...header,
        type: new Int32(),
        data: new Int32Array(data.buffer, data.byteOffset, length),
      });
    }
    case 'float64': {
      const data = aligned(c.data, 8);
      return makeData({
        ...header,
        type: new Float64(),
        data: new Float64Array(data.buffer, data.byteOffset, length),
      });
    }
    case 'int64':
    case 'timestamp': {
      const data = aligned(c.data, 8);
      const type = kind === 'int64' ? new Int64() : new Timestamp(TimeUnit.MILLISECOND);
      return makeData({
        ...header,
        type,
        data: new BigInt64Array(data.buffer, data.byteOffset, length),
      } as never);
    }
  }
}
