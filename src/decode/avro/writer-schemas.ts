import * as avro from 'avsc';
import { errorMessage } from '../../common/errors';
import { HEADER_BYTES } from '../../schema-registry/wire-format';
import type { RegistryPayloadFormat, RegistryVerdict } from '../registry-writer-schemas';
import { avroColumns, type AvroColumns, type AvroMappingOptions } from './avro-mapping';
import { blockCountCheck, type BlockCountCheck } from './block-counts';
import { compileAvroReader, NotCompiled, type CompiledAvroReader } from './compiled-reader';

interface ParsedAvro {
  readonly type: avro.Type;
  readonly columns: AvroColumns;
  /** Refuses a datum whose array or map counts avsc would loop on; undefined: the schema has none. */
  readonly blockCounts: BlockCountCheck | undefined;
  /** Reads this schema's records straight into the columns; undefined: the schema is left to `decode`. */
  readonly compiled: { readonly reader: CompiledAvroReader } | undefined;
}

/** The reader of a schema, or undefined where the compiled reader does not cover it. */
function compiledOf(type: avro.Type, columns: AvroColumns): CompiledAvroReader | undefined {
  if (process.env.KAFKA_LANCE_COMPILED_AVRO === 'off') return undefined;
  try {
    return compileAvroReader(type, columns.fields);
  } catch (error) {
    if (error instanceof NotCompiled) return undefined;
    throw error;
  }
}

/**
 * Longs as exact BigInts: avsc's default reads them as doubles, which round beyond 2^53
 * (an int64 column must hold the value exactly or not at all).
 */
const EXACT_LONG = avro.types.LongType.__with({
  fromBuffer: (buf: Buffer) => buf.readBigInt64LE(),
  toBuffer: (n: bigint) => {
    const buf = Buffer.alloc(8);
    buf.writeBigInt64LE(n);
    return buf;
  },
  fromJSON: (n: number | string) => BigInt(n),
  toJSON: (n: bigint) => Number(n),
  isValid: (n: unknown) => typeof n === 'bigint',
  compare: (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0),
});

/**
 * The schema with every long written as an object (`{"type": "long", ...}`: a logical type's
 * or Kafka Connect's annotated base, such as Debezium's NanoTimestamp) written as the name, which
 * the registry option maps to EXACT_LONG: avsc builds its own LongType for the object form, and
 * that refuses a value beyond 2^53 (every nanosecond timestamp of this century). The
 * annotations matter to the column mapping only, which reads the original schema.
 */
function exactLongs(type: unknown): unknown {
  if (Array.isArray(type)) return type.map(exactLongs);
  if (type === null || typeof type !== 'object') return type;
  const object = type as Record<string, unknown>;
  if (object.type === 'long') return 'long';
  const out: Record<string, unknown> = { ...object };
  if (typeof object.type === 'object') out.type = exactLongs(object.type);
  if (Array.isArray(object.fields))
    out.fields = object.fields.map((f: unknown) =>
      f !== null && typeof f === 'object' ? { ...f, type: exactLongs((f as { type?: unknown }).type) } : f,
    );
  if ('items' in object) out.items = exactLongs(object.items);
  if ('values' in object) out.values = exactLongs(object.values);
  return out;
}

/**
 * Avro in the Confluent wire format: the payload is one datum's binary encoding. With
 * `connectTypes` (the Debezium envelope), Kafka Connect's `connect.name` types are mapped as
 * what they mean (avro-mapping.ts).
 */
export function avroPayloads(options: AvroMappingOptions = {}): RegistryPayloadFormat<ParsedAvro> {
  return {
    format: 'avro',
    schemaType: 'AVRO',
    parse(schema) {
      const json = JSON.parse(schema) as Parameters<typeof avroColumns>[0];
      const type = avro.Type.forSchema(exactLongs(json) as avro.Schema, {
        wrapUnions: true,
        registry: { long: EXACT_LONG },
      });
      const columns = avroColumns(json, options);
      const reader = compiledOf(type, columns);
      return { type, columns, blockCounts: blockCountCheck(type), compiled: reader && { reader } };
    },
    compiled: (parsed) => parsed.compiled,
    decode(parsed, value) {
      const buf = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
      const badBlocks = parsed.blockCounts?.(buf, HEADER_BYTES);
      if (badBlocks !== undefined) return undecodable(badBlocks);
      let decoded: { value: unknown; offset: number };
      try {
        decoded = parsed.type.decode(buf, HEADER_BYTES);
      } catch (error) {
        return undecodable(errorMessage(error));
      }
      if (decoded.offset < 0) return undecodable('the payload ends before the datum does');
      if (decoded.offset !== buf.length)
        return undecodable(
          `${buf.length - decoded.offset} bytes follow the datum (written with another schema?)`,
        );
      try {
        return { row: parsed.columns.toRow(decoded.value), fields: parsed.columns.fields };
      } catch (error) {
        return undecodable(errorMessage(error));
      }
    },
  };
}

export const AVRO_PAYLOADS = avroPayloads();

function undecodable(why: string): RegistryVerdict {
  return { reason: 'undecodable-payload', detail: `the payload is not an Avro datum of this schema: ${why}` };
}
