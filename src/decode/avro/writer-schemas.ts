import * as avro from 'avsc';
import type { NamedField } from '../../config';
import { errorMessage } from '../../common/errors';
import type { DeadLetterReason } from '../dead-letter-reason';
import { HEADER_BYTES, frameOf, type WriterSchema } from '../../schema-registry/wire-format';
import { avroColumns, type AvroColumns } from './avro-mapping';

/** One record's row and the columns of its writer schema. */
export interface AvroRow {
  readonly schemaId: number;
  readonly row: Record<string, unknown>;
  readonly fields: readonly NamedField[];
}

export interface AvroVerdict {
  readonly reason: Extract<
    DeadLetterReason,
    'wrong-magic-byte' | 'unknown-schema-id' | 'unsupported-schema' | 'undecodable-payload'
  >;
  readonly detail: string;
}

type Parsed = { readonly type: avro.Type; readonly columns: AvroColumns } | { readonly verdict: AvroVerdict };

/** A staging worker keeps this many writer schemas parsed (the least recently used go first). */
export const MAX_PARSED_SCHEMAS = 1_000;

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
 * The writer schemas of a staging worker, by id: learnt from what the main thread fetched
 * from the registry (it sends those of every batch with the batch), parsed once each.
 */
export class AvroWriterSchemas {
  readonly #parsed = new Map<number, Parsed>();
  readonly #texts = new Map<number, string>();

  /**
   * Takes the schemas a batch came with; an id already parsed from the same text is kept.
   * Returns the ids whose schema is new or changed (a registry that was reset reuses ids).
   */
  learn(schemas: readonly WriterSchema[]): number[] {
    const changed: number[] = [];
    for (const s of schemas) {
      const text = 'unknown' in s ? `unknown:${s.unknown}` : `${s.schemaType}:${s.schema}`;
      if (this.#texts.get(s.id) === text) continue;
      changed.push(s.id);
      this.#texts.set(s.id, text);
      this.#parsed.set(s.id, parse(s));
      while (this.#parsed.size > MAX_PARSED_SCHEMAS) {
        const oldest = this.#parsed.keys().next().value!;
        this.#parsed.delete(oldest);
        this.#texts.delete(oldest);
      }
    }
    return changed;
  }

  /** One framed value → its row, or why it is a dead letter (the schema id in the detail). */
  decode(value: Uint8Array): AvroRow | AvroVerdict {
    const frame = frameOf(value);
    if ('invalid' in frame) return { reason: 'wrong-magic-byte', detail: frame.invalid };
    const { schemaId } = frame;
    const parsed = this.#parsed.get(schemaId);
    if (!parsed) {
      // The main thread sends every id of a batch with it: a missing one is a bug, not bad input.
      throw new Error(`schema id ${schemaId} was not sent with its batch`);
    }
    // Recently used last: eviction takes the oldest.
    this.#parsed.delete(schemaId);
    this.#parsed.set(schemaId, parsed);
    if ('verdict' in parsed) return parsed.verdict;
    const buf = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    let decoded: { value: unknown; offset: number };
    try {
      decoded = parsed.type.decode(buf, HEADER_BYTES);
    } catch (error) {
      return undecodable(schemaId, errorMessage(error));
    }
    if (decoded.offset < 0) return undecodable(schemaId, 'the payload ends before the datum does');
    if (decoded.offset !== buf.length)
      return undecodable(
        schemaId,
        `${buf.length - decoded.offset} bytes follow the datum (written with another schema?)`,
      );
    try {
      return { schemaId, row: parsed.columns.toRow(decoded.value), fields: parsed.columns.fields };
    } catch (error) {
      return undecodable(schemaId, errorMessage(error));
    }
  }
}

function undecodable(schemaId: number, why: string): AvroVerdict {
  return {
    reason: 'undecodable-payload',
    detail: `schema id ${schemaId}: the payload is not an Avro datum of this schema: ${why}`,
  };
}

function parse(s: WriterSchema): Parsed {
  if ('unknown' in s)
    return {
      verdict: {
        reason: 'unknown-schema-id',
        detail: `schema id ${s.id}: the registry has no such schema (${s.unknown})`,
      },
    };
  const unsupported = (why: string): Parsed => ({
    verdict: { reason: 'unsupported-schema', detail: `schema id ${s.id}: ${why}` },
  });
  if (s.schemaType !== 'AVRO') return unsupported(`a ${s.schemaType} schema, and the format is avro`);
  try {
    const json = JSON.parse(s.schema) as Parameters<typeof avroColumns>[0];
    const type = avro.Type.forSchema(json as avro.Schema, {
      wrapUnions: true,
      registry: { long: EXACT_LONG },
    });
    return { type, columns: avroColumns(json) };
  } catch (error) {
    // avsc's parse errors and UnsupportedAvroSchema alike: the schema, not a record, is at fault.
    return unsupported(`not a schema this replica can map to columns: ${errorMessage(error)}`);
  }
}
