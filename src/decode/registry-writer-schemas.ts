import type { NamedField } from '../config';
import { errorMessage } from '../common/errors';
import type { CompiledReader } from './compiled-reader';
import type { DeadLetterReason } from '../dead-letters/dead-letter-reason';
import {
  HEADER_BYTES,
  frameOf,
  schemaTextBytes,
  type ReferencedSchema,
  type WriterSchema,
} from '../schema-registry/wire-format';

/** One record's row and the columns of its writer schema. */
export interface RegistryRow {
  readonly schemaId: number;
  readonly row: Record<string, unknown>;
  readonly fields: readonly NamedField[];
  /**
   * Which of the schema's types wrote it, when a schema has several (Protobuf: the
   * message-index path, "1.0"): each maps to columns of its own.
   */
  readonly message?: string;
}

export interface RegistryVerdict {
  readonly reason: Extract<
    DeadLetterReason,
    | 'wrong-magic-byte'
    | 'unknown-schema-id'
    | 'unsupported-schema'
    | 'undecodable-payload'
    | 'invalid-message-index'
    | 'schema-validation-failed'
  >;
  readonly detail: string;
}

/**
 * What differs between the registry formats (Avro, Protobuf, JSON Schema): how a
 * registry's schema text is parsed into columns and a reader, and how a framed value
 * is read with it. The framing, the cache of parsed schemas and the verdicts for
 * unknown ids are shared (RegistryWriterSchemas).
 */
export interface RegistryPayloadFormat<Parsed> {
  /** The `format` of the consumer definition, for messages. */
  readonly format: string;
  /** The registry's `schemaType` this format reads (Confluent's AVRO, PROTOBUF, JSON). */
  readonly schemaType: string;
  /**
   * Throws when the schema has no column mapping (its records are dead letters,
   * unsupported-schema). `references`: the schemas it references, by the names it uses.
   */
  parse(schema: string, references: readonly ReferencedSchema[]): Parsed;
  /**
   * A framed value (header included) → its row, or why it is a dead letter. The detail
   * need not name the schema id: it is prefixed with it.
   */
  decode(parsed: Parsed, value: Uint8Array): Omit<RegistryRow, 'schemaId'> | RegistryVerdict;
  /**
   * A reader of the value's records straight into the column builders, where the schema (and
   * the value's message type, `message` as in RegistryRow) has one.
   */
  compiled?(parsed: Parsed, value: Uint8Array): CompiledWriter | undefined;
}

/** A compiled reader and the message type it reads (`message` as in RegistryRow); the same object for every record of the type. */
export interface CompiledWriter {
  readonly reader: CompiledReader;
  readonly message?: string;
}

type Entry<Parsed> = { readonly parsed: Parsed } | { readonly verdict: RegistryVerdict };

/** A staging worker keeps this many writer schemas parsed (the least recently used go first). */
export const MAX_PARSED_SCHEMAS = 1_000;
/**
 * And parsed from at most this many bytes of schema text: a schema may be 16 MiB and 10,000
 * fields, so a count alone would let 1,000 of them hold gigabytes per worker.
 */
export const MAX_PARSED_SCHEMA_BYTES = 32 * 1024 * 1024;

/**
 * The writer schemas of a staging worker, by id: learnt from what the main thread fetched
 * from the registry (it sends those of every batch with the batch), parsed once each.
 */
export class RegistryWriterSchemas<Parsed> {
  readonly #parsed = new Map<number, Entry<Parsed>>();
  readonly #texts = new Map<number, { readonly text: string; readonly bytes: number }>();
  #bytes = 0;
  /** The id last moved to the recently-used end (nothing moved or added since): no move needed. */
  #touched: number | undefined;
  /** What compiledReader answers for each of the formats' answers: made once, not per record. */
  readonly #writers = new WeakMap<
    CompiledWriter,
    { readonly writer: string; readonly reader: CompiledReader }
  >();

  constructor(private readonly payloads: RegistryPayloadFormat<Parsed>) {}

  /**
   * Takes the schemas a batch came with; an id already parsed from the same text is kept.
   * Returns the ids whose schema is new or changed (a registry that was reset reuses ids).
   *
   * Every id of the batch moves to the recently-used end before anything is evicted, and
   * eviction (past MAX_PARSED_SCHEMAS ids or MAX_PARSED_SCHEMA_BYTES of text) stops at the
   * batch's own ids: a batch with more distinct ids or text than the bounds keeps them all
   * until the next batch (a batch of headers with a new id each is input,
   * and must become dead letters, not a staging failure).
   */
  learn(schemas: readonly WriterSchema[]): number[] {
    this.#touched = undefined;
    const changed: number[] = [];
    for (const s of schemas) {
      const text =
        'unknown' in s
          ? `unknown:${s.unknown}`
          : `${s.schemaType}:${s.schema}${s.references ? JSON.stringify(s.references) : ''}`;
      const entry = this.#texts.get(s.id)?.text === text ? this.#parsed.get(s.id) : undefined;
      if (entry) {
        this.#parsed.delete(s.id);
        this.#parsed.set(s.id, entry);
        continue;
      }
      changed.push(s.id);
      this.#forget(s.id);
      const bytes = schemaTextBytes(s);
      this.#texts.set(s.id, { text, bytes });
      this.#bytes += bytes;
      this.#parsed.set(s.id, this.#parse(s));
    }
    const inHand = new Set(schemas.map((s) => s.id));
    for (;;) {
      const oldest = this.#parsed.keys().next().value;
      if (oldest === undefined || inHand.has(oldest)) break;
      if (this.#parsed.size <= MAX_PARSED_SCHEMAS && this.#bytes <= MAX_PARSED_SCHEMA_BYTES) break;
      this.#forget(oldest);
    }
    return changed;
  }

  /** How many bytes of schema text the parsed schemas kept come from. */
  get textBytes(): number {
    return this.#bytes;
  }

  #forget(id: number): void {
    this.#parsed.delete(id);
    this.#bytes -= this.#texts.get(id)?.bytes ?? 0;
    this.#texts.delete(id);
  }

  /** One framed value → its row, or why it is a dead letter (the schema id in the detail). */
  decode(value: Uint8Array): RegistryRow | RegistryVerdict {
    const frame = frameOf(value);
    if ('invalid' in frame) return { reason: 'wrong-magic-byte', detail: frame.invalid };
    const { schemaId } = frame;
    const entry = this.#parsed.get(schemaId);
    if (!entry) {
      // The main thread sends every id of a batch with it, and learn() keeps them all; should
      // one still be missing, its record is a dead letter with the reason, not a fatal error
      // that would stop the partition on every start.
      return {
        reason: 'unknown-schema-id',
        detail: `schema id ${schemaId}: not among the writer schemas sent with its batch`,
      };
    }
    this.#touch(schemaId, entry);
    if ('verdict' in entry) return entry.verdict;
    let decoded: Omit<RegistryRow, 'schemaId'> | RegistryVerdict;
    try {
      decoded = this.payloads.decode(entry.parsed, value);
    } catch (error) {
      decoded = { reason: 'undecodable-payload', detail: errorMessage(error) };
    }
    if ('reason' in decoded)
      return { reason: decoded.reason, detail: `schema id ${schemaId}: ${decoded.detail}` };
    return { schemaId, ...decoded };
  }

  /**
   * A framed value's compiled reader and writer (its schema id, and `/` its message-index path
   * where the format has several types per schema: the record decoder's name for a writer),
   * when its schema is parsed and has one (the schema moves to the recently-used end, as with
   * `decode`); else undefined and the value goes to `decode`.
   */
  compiledReader(
    value: Uint8Array,
  ): { readonly writer: string; readonly reader: CompiledReader } | undefined {
    if (!this.payloads.compiled || value.byteLength < HEADER_BYTES || value[0] !== 0) return undefined;
    const schemaId = ((value[1]! << 24) | (value[2]! << 16) | (value[3]! << 8) | value[4]!) >>> 0;
    const entry = this.#parsed.get(schemaId);
    if (!entry || 'verdict' in entry) return undefined;
    const found = this.payloads.compiled(entry.parsed, value);
    if (!found) return undefined;
    this.#touch(schemaId, entry);
    let answer = this.#writers.get(found);
    if (answer === undefined) {
      const writer = found.message === undefined ? String(schemaId) : `${schemaId}/${found.message}`;
      answer = { writer, reader: found.reader };
      this.#writers.set(found, answer);
    }
    return answer;
  }

  /** Moves a schema to the recently-used end (eviction takes the oldest), unless it is there. */
  #touch(schemaId: number, entry: Entry<Parsed>): void {
    if (this.#touched === schemaId) return;
    this.#parsed.delete(schemaId);
    this.#parsed.set(schemaId, entry);
    this.#touched = schemaId;
  }

  #parse(s: WriterSchema): Entry<Parsed> {
    if ('unknown' in s)
      return {
        verdict: {
          reason: 'unknown-schema-id',
          detail: `schema id ${s.id}: the registry has no such schema (${s.unknown})`,
        },
      };
    const unsupported = (why: string): Entry<Parsed> => ({
      verdict: { reason: 'unsupported-schema', detail: `schema id ${s.id}: ${why}` },
    });
    if (s.schemaType !== this.payloads.schemaType)
      return unsupported(`a ${s.schemaType} schema, and the format is ${this.payloads.format}`);
    try {
      return { parsed: this.payloads.parse(s.schema, s.references ?? []) };
    } catch (error) {
      // Parse errors and unmappable schemas alike: the schema, not a record, is at fault.
      return unsupported(`not a schema this replica can map to columns: ${errorMessage(error)}`);
    }
  }
}

/** The writer schemas of one registry format, as the record decoder uses them. */
export type WriterSchemas = Pick<RegistryWriterSchemas<unknown>, 'learn' | 'decode' | 'compiledReader'>;
