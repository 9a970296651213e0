import { errorMessage } from '../common/errors';
import type { Row } from '../config';
import type { DecoderOptions } from './decoder-options';
import { minuteKeyOf, type MinuteKey } from '../staging/part-name';
import { ROW_COLUMN } from '../staging/system-columns';
import type { DeadLetterVerdict } from '../dead-letters/dead-letter-reason';
import { mayHoldUnsafeInteger, parseJsonExact } from './exact-json';
import { columnNameProblem } from '../config/column-name';
import { writerSchemasFor } from './registry-formats';
import type { WriterSchemas } from './registry-writer-schemas';
import { KeyColumn } from './key-column';
import type { WriterSchema } from '../schema-registry/wire-format';
import { parseTimestamp } from './timestamp';
import { NativeJsonColumns } from './native-json-columns';
import { BatchColumns, KEY_COLUMN } from './batch-columns';
import { declaredField, inferredField, type FieldState, type WriterFieldChanges } from './field-state';
import { normalizeRows, sourceRecord } from './transform-rows';
import type { RawMessage } from './raw-message';
import { decodeNatively, type NativeBatchReader } from './native-dispatch';
import { changeOf, tombstoneDelete } from './debezium-rows';
import { DebeziumKeys, envelopeColumns, type WriterColumns } from './debezium-registry';
import { SEQUENCE_COLUMN } from '../config/upsert-options';
import { convertRows } from './row-conversion';
import { DecoderColumns } from './writer-columns';
import type { DecodedBatch, DecodedSegment } from './decoded-batch';
import { CompiledRows } from './compiled-rows';

export type { RawMessage } from './raw-message';

export type { DecodedBatch, DecodedSegment } from './decoded-batch';

export type { DecoderOptions, KnownField } from './decoder-options';

export { KEY_COLUMN } from './batch-columns';
/** Index of a row among the rows one record's transform produced: keeps (topic, partition, offset, _row) unique. */
export { ROW_COLUMN };

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Turns Kafka messages into an Arrow batch in the table's schema, plus verdicts for
 * the records that cannot be staged. A record is converted whole before any of its
 * values is appended, so a bad record never leaves half a row behind.
 *
 * Values are stored exactly or not at all: integer literals beyond 2^53 are read
 * exactly (exact-json.ts) and go into int64 or timestamp columns exactly, into
 * float64 only when the double is that integer, into json columns as their digits;
 * a timestamp outside years 0000-9999 (timestamp.ts), an int64 out of range or a
 * string with a lone surrogate is a dead letter with the reason.
 *
 * With `schema: 'infer'` the field list grows as new keys appear (new nullable
 * columns); a value whose kind conflicts with its column's type is a dead letter
 * naming column, expected and actual type. The inferred fields persist across
 * batches in this decoder. Rules that let staging workers, replicas and restarts
 * agree without talking to each other:
 * - A column's type follows only the JSON kind of the value that creates it:
 *   number → float64 (never int64, which a later 1.5 would contradict), string →
 *   string, boolean → boolean, object or array → json. null creates no column.
 * - `knownFields` seeds the table's existing columns, which keep their types.
 * - At most `maxInferredColumns` data columns (known ones included): a record that
 *   would add more is a dead letter (too-many-columns); registry formats too, whose
 *   columns come from the writer schemas. Map-like objects belong
 *   under one key (a json column) or in a declared json field.
 * - A key Lance cannot take as a column name is a dead letter naming the key, not
 *   renamed: a renaming ("a.b" → "a_b") could collide with a real key and would
 *   move data without a trace. Refused (measured with LanceDB 0.39): "" and "`"
 *   (created, but every later add fails), "." (the nested-field separator; create
 *   and addColumns refuse it), a lone surrogate (stored as U+FFFD, a different name),
 *   and "_..." (reserved for kafka-lance's columns). Spaces, quotes, non-ASCII and
 *   case-distinct names are fine.
 */
export class RecordDecoder {
  readonly #options: DecoderOptions;
  /** The columns, and what the registry's writer schemas made of them (writer-columns.ts). */
  readonly #columns: DecoderColumns;
  readonly #infer: boolean;
  readonly #clock: () => number;
  /** Registry formats: the writer schemas by id; the columns grow as they bring new fields. */
  readonly #registry: WriterSchemas | undefined;
  /** With `includeKey`: the key's reading into `_key`. */
  readonly #keys: KeyColumn | undefined;
  /** The Debezium envelope: its record keys, read for tombstones and deletes without `before`. */
  readonly #debeziumKeys: DebeziumKeys | undefined;
  /** Avro, Protobuf: writer schemas' compiled readers (compiled-rows.ts) when this decoder may use them. */
  readonly #compiled: CompiledRows | undefined;
  /** Declared JSON fields the native decoder takes: it reads each batch first. */
  readonly #native: NativeJsonColumns | undefined;
  /** Batches a native decoder threw on (each then read by the TypeScript decoder). */
  #nativeFailures = 0;

  /**
   * `jsonDecoder`: 'typescript' keeps every record in this file's decoder (the reference
   * the native decoder is tested against); 'native' uses the native one where it can.
   */
  constructor(
    options: DecoderOptions,
    clock: () => number = Date.now,
    jsonDecoder: 'native' | 'typescript' = 'native',
  ) {
    this.#options = options;
    this.#registry = writerSchemasFor(options.format, { connectTypes: options.envelope === 'debezium' });
    this.#keys = options.includeKey
      ? new KeyColumn(options.keyFormat ?? 'binary', options.epochUnit, options.tableKeyType)
      : undefined;
    this.#debeziumKeys =
      options.envelope === 'debezium'
        ? new DebeziumKeys(options.keyFormat ?? 'binary', options.upsertKey ?? [])
        : undefined;
    // Registry formats take their columns from the writer schemas, not from the keys.
    this.#infer = options.fields === undefined && this.#registry === undefined;
    const fields =
      options.format === 'raw' && !options.transform
        ? [] // raw without transform: fixed key/value binary columns below
        : (options.fields ?? []).map((f) => declaredField(f, options.epochUnit));
    if (this.#infer && fields.length === 0) {
      for (const { name, type } of options.knownFields ?? []) {
        if (columnNameProblem(name) !== undefined || fields.some((f) => f.name === name)) continue;
        fields.push(inferredField(name, type, options.epochUnit));
      }
    }
    this.#columns = new DecoderColumns(fields, options);
    this.#clock = clock;
    // Declared fields only: the native decoder keeps no state between records.
    // (Upsert rows carry `_deleted`, which the native decoder does not make.)
    const declaredJson =
      options.format === 'json' &&
      !options.transform &&
      !this.#infer &&
      !this.#registry &&
      !this.#keys &&
      options.upsertKey === undefined;
    this.#native =
      declaredJson && jsonDecoder === 'native'
        ? NativeJsonColumns.for(this.#columns.fields, options.eventTimeField)
        : undefined;
    // Rows of no transform or envelope, whose minute is the batch's: the reader writes only values.
    this.#compiled =
      this.#registry &&
      jsonDecoder === 'native' &&
      options.fields === undefined &&
      options.eventTimeField === undefined &&
      !options.transform &&
      options.envelope !== 'debezium'
        ? new CompiledRows(this.#registry)
        : undefined;
  }

  /** Whether batches go to the native JSON decoder first (native-json-columns.ts). */
  get native(): boolean {
    return this.#native !== undefined;
  }

  /**
   * `topicId`: the incarnation of the topic the messages were fetched from ('' when unknown).
   * `schemas`: registry formats, what the registry said of every schema id in the messages.
   */
  decode(
    topic: string,
    partition: number,
    messages: readonly RawMessage[],
    topicId = '',
    schemas: readonly WriterSchema[] = [],
  ): DecodedBatch {
    const readerFor = this.#nativeReaderFor(schemas);
    const native =
      readerFor &&
      decodeNatively(
        readerFor,
        { topic, partition, messages, topicId },
        {
          fields: this.#columns.fields,
          maxRecordBytes: this.#options.maxRecordBytes,
          eventTimeField: this.#options.eventTimeField,
          clock: this.#clock,
          onNativeFailure: (error) => this.#nativeFailed(error),
        },
        (message) => this.#decodeEach(topic, partition, [message], topicId, schemas),
      );
    return native || this.#decodeEach(topic, partition, messages, topicId, schemas);
  }

  /** Said once per decoder: the batches a native decoder fails on are the TypeScript decoder's. */
  #nativeFailed(error: unknown): void {
    if (this.#nativeFailures++ > 0) return;
    process.emitWarning(
      `a native decoder failed (${errorMessage(error)}); the batches it fails on are read by the TypeScript decoder`,
      { code: 'KAFKA_LANCE_NATIVE_DECODE' },
    );
  }

  /**
   * What reads a batch natively, if anything: the native JSON decoder, or for a registry format
   * the native reader of the one admitted writer all of a batch's values have (CompiledRows's
   * nativeReader; the batch's schemas are learnt first, as `#decodeEach` would). Rows that carry
   * a key or `_deleted` are not made there.
   */
  #nativeReaderFor(
    schemas: readonly WriterSchema[],
  ): ((candidates: readonly RawMessage[]) => NativeBatchReader | undefined) | undefined {
    const json = this.#native;
    if (json) return () => json;
    const compiled = this.#compiled;
    if (!compiled || this.#keys || this.#options.upsertKey !== undefined) return undefined;
    const table = this.#columns;
    for (const id of this.#registry!.learn(schemas)) table.forget(id);
    return (candidates) => compiled.nativeReader(candidates, table.fields, table.admitted, table.writerTypes);
  }

  #decodeEach(
    topic: string,
    partition: number,
    messages: readonly RawMessage[],
    topicId = '',
    schemas: readonly WriterSchema[] = [],
  ): DecodedBatch {
    const table = this.#columns;
    for (const id of this.#registry?.learn(schemas) ?? []) table.forget(id);
    this.#keys?.learn(schemas);
    this.#debeziumKeys?.learn(schemas);
    const deadLetters: DeadLetterVerdict[] = [];
    const raw = this.#options.format === 'raw' && !this.#options.transform;
    const debezium = this.#options.envelope === 'debezium';
    const upsert =
      this.#options.upsertKey === undefined
        ? undefined
        : { deletes: this.#options.tombstones === 'delete' || debezium, key: this.#options.upsertKey };
    // Upsert on the record key: a record without a key names no row.
    const keyed = this.#options.upsertKey?.includes(KEY_COLUMN) === true;
    let valueBytes = 0;
    for (const m of messages) valueBytes += m.value?.byteLength ?? 0;
    const capacity = { rows: messages.length, valueBytes };
    const newColumns = () =>
      new BatchColumns(
        table.fields,
        raw,
        this.#keys,
        this.#options.transform !== undefined,
        topic,
        topicId,
        upsert,
        // The native JSON decoder makes the data columns: its builders take no room up front.
        this.#native ? undefined : capacity,
      );
    let builders = newColumns();
    let eventMinutes: MinuteKey[] = [];
    const ingestMinute = minuteKeyOf(this.#clock());
    const earlier: DecodedSegment[] = [];
    let lastStaged = -1;

    /**
     * Registry formats: what a writer schema's columns change, held to the column caps; a
     * column it retypes ends the segment (a column's type cannot change within a batch: the
     * rows so far keep theirs and go to a part of their own; whether the table takes the new
     * type is the publication's decision, sameColumnType, src/lance/table-schema.ts, the one
     * place that knows the table: a refused publication is set aside with its reason, never a
     * dead letter here).
     */
    const admit = (writer: WriterColumns): WriterFieldChanges | Omit<DeadLetterVerdict, 'offset'> => {
      const changes = table.admit(writer);
      if ('reason' in changes || changes.retyped.length === 0) return changes;
      const segment = builders.finish();
      if (segment)
        earlier.push({
          batch: segment,
          minute: this.#options.eventTimeField !== undefined ? eventMinutes : ingestMinute,
          through: lastStaged,
        });
      table.retype(changes.retyped);
      builders = newColumns();
      eventMinutes = [];
      return changes;
    };
    /** A record's new columns (converted with it) join the batch and the decoder's fields; its writer is admitted. */
    const takeColumns = (
      added: readonly FieldState[],
      types: readonly (readonly [string, string])[],
      writer: string | undefined,
    ) => {
      for (const field of added) builders.addField(field);
      table.take(added, types, writer);
    };

    for (const message of messages) {
      const verdict = (reason: DeadLetterVerdict['reason'], detail: string, field?: string) =>
        deadLetters.push(
          field === undefined
            ? { offset: message.offsetNumber, reason, detail }
            : { offset: message.offsetNumber, reason, detail, field },
        );
      const size = (message.key?.byteLength ?? 0) + (message.value?.byteLength ?? 0);
      if (size > this.#options.maxRecordBytes) {
        verdict('too-large', `${size} bytes exceed maxRecordBytes ${this.#options.maxRecordBytes}`);
        continue;
      }
      if (keyed && message.key === null) {
        verdict('missing-key', 'no record key: an upsert table keyed on the record key has no row for it');
        continue;
      }
      if (message.value === null) {
        if (this.#options.tombstones === 'dead-letter') verdict('tombstone', 'null value (tombstone)');
        if (this.#options.tombstones !== 'delete') continue;
        // Its `_timestamp` orders it against the key's records in other partitions.
        const deleteTime = Number.isSafeInteger(message.timestampNumber)
          ? parseTimestamp(message.timestampNumber, 'ms')
          : { invalid: `${message.timestampNumber} is not a time` };
        if ('invalid' in deleteTime) {
          verdict('invalid-event-time', `Kafka timestamp: ${deleteTime.invalid}`);
          continue;
        }
        const key = this.#keys?.convert(message.key) ?? { value: null };
        if ('reason' in key) {
          verdict(key.reason, key.detail, key.field);
          continue;
        }
        if (debezium) {
          // Key fields: the delete's row holds them, read from the record key.
          const change = tombstoneDelete(
            this.#debeziumKeys!,
            message.key,
            this.#options.upsertKey ?? [],
            this.#registry !== undefined,
          );
          if ('reason' in change) {
            verdict(change.reason, change.detail, change.field);
            continue;
          }
          const keyColumns = change.columns;
          const columns = keyColumns ? admit(keyColumns) : { added: [], types: [] };
          if ('reason' in columns) {
            verdict(columns.reason, columns.detail, columns.field);
            continue;
          }
          const converted = convertRows([change.key], columns.added, {
            fields: table.fields,
            byName: table.byName,
            infer: undefined,
          });
          if ('reason' in converted) {
            verdict(converted.reason, converted.detail, converted.field);
            continue;
          }
          takeColumns(converted.newFields, columns.types, keyColumns?.writer);
          builders.appendSystem(partition, message, 0, key.value, true);
          builders.appendValues(converted.values[0]!);
        } else {
          builders.appendSystem(partition, message, 0, key.value, true);
          builders.appendNoValues();
        }
        // A delete has no event time of its own: its Kafka timestamp's minute.
        if (this.#options.eventTimeField !== undefined)
          eventMinutes.push(minuteKeyOf(message.timestampNumber));
        lastStaged = message.offsetNumber;
        continue;
      }
      // _timestamp is Timestamp(ms) like any other: a producer's wild CreateTime (or NaN from a
      // malformed header) would make BigInt throw, and the batch would crash-loop.
      const kafkaTime = Number.isSafeInteger(message.timestampNumber)
        ? parseTimestamp(message.timestampNumber, 'ms')
        : { invalid: `${message.timestampNumber} is not a time` };
      if ('invalid' in kafkaTime) {
        verdict('invalid-event-time', `Kafka timestamp: ${kafkaTime.invalid}`);
        continue;
      }
      const key = this.#keys?.convert(message.key) ?? { value: null };
      if ('reason' in key) {
        verdict(key.reason, key.detail, key.field);
        continue;
      }
      if (raw) {
        builders.appendSystem(partition, message, 0, key.value);
        builders.appendRaw(message);
        continue;
      }
      let value: unknown = message.value;
      if (this.#options.format === 'json') {
        let text: string;
        try {
          text = utf8.decode(message.value);
        } catch {
          verdict('invalid-utf8', 'the value is not valid UTF-8');
          continue;
        }
        try {
          // V8's parser unless the bytes hold a number it could round (same values either way).
          value = mayHoldUnsafeInteger(message.value) ? parseJsonExact(text) : JSON.parse(text);
        } catch (error) {
          verdict('invalid-json', errorMessage(error));
          continue;
        }
      }
      let rows: readonly Row[] = [];
      /** A Debezium delete: its row holds the key only and is staged `_deleted`. */
      let deleting = false;
      let writerFields: FieldState[] = [];
      let writerTypes: readonly (readonly [string, string])[] = [];
      let writerSchema: string | undefined;
      /** A Debezium event: the parsed JSON value, or a registry envelope's row. */
      let event: unknown = value;
      if (this.#registry) {
        // A record of an admitted writer that its compiled reader reads exactly: straight into the columns.
        const compiled = this.#compiled?.check(
          message.value,
          table.fields,
          table.admitted,
          table.writerTypes,
        );
        if (compiled) {
          builders.appendSystem(partition, message, 0, key.value);
          this.#compiled!.append(compiled, message.value, builders);
          lastStaged = message.offsetNumber;
          continue;
        }
        const decoded = this.#registry.decode(message.value);
        if ('reason' in decoded) {
          verdict(decoded.reason, decoded.detail);
          continue;
        }
        const writer =
          decoded.message === undefined ? String(decoded.schemaId) : `${decoded.schemaId}/${decoded.message}`;
        // A Debezium envelope's columns are its `after` record's.
        const columns = debezium
          ? envelopeColumns(
              decoded.fields,
              this.#options.upsertKey ?? [],
              this.#options.sequence !== undefined,
              decoded.schemaId,
            )
          : decoded.fields;
        if ('reason' in columns) {
          verdict(columns.reason, columns.detail, columns.field);
          continue;
        }
        const fields = admit({ writer, schemaId: decoded.schemaId, fields: columns });
        if ('reason' in fields) {
          verdict(fields.reason, fields.detail);
          continue;
        }
        ({ added: writerFields, types: writerTypes } = fields);
        writerSchema = writer;
        if (debezium) event = decoded.row;
        else rows = [decoded.row];
      }
      if (debezium) {
        const change = changeOf(
          event,
          message.key,
          this.#debeziumKeys!,
          (name) => table.byName.get(name) ?? writerFields.find((f) => f.name === name),
          {
            upsertKey: this.#options.upsertKey ?? [],
            truncate: this.#options.truncate,
            sequence: this.#options.sequence,
          },
        );
        if ('reason' in change) {
          verdict(change.reason, change.detail, change.field);
          continue;
        }
        if (change.kind === 'truncate') {
          // A delete row without a key: the merge deletes every row before it (upsert-merge.ts),
          // ordered by its sequence (`_sequence`, its one value) when the definition names one.
          takeColumns(writerFields, writerTypes, writerSchema);
          builders.appendSystem(partition, message, 0, key.value, true);
          const sequence = change.sequence;
          if (sequence == null) builders.appendNoValues();
          else
            builders.appendValues(
              table.fields.map((f) => (f.name === SEQUENCE_COLUMN ? BigInt(sequence) : null)),
            );
          if (this.#options.eventTimeField !== undefined)
            eventMinutes.push(minuteKeyOf(message.timestampNumber));
          lastStaged = message.offsetNumber;
          continue;
        } else {
          deleting = change.kind === 'delete';
          rows = [change.kind === 'delete' ? change.key : change.row];
        }
      } else if (this.#registry) {
        // rows: the writer's row, above.
      } else if (this.#options.transform) {
        try {
          rows = normalizeRows(this.#options.transform(sourceRecord(topic, partition, message, value)));
        } catch (error) {
          verdict('transform-failed', errorMessage(error));
          continue;
        }
      } else if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
        rows = [value as Row];
      } else {
        verdict(
          'not-an-object',
          `the value is ${Array.isArray(value) ? 'an array' : typeof value}, not a JSON object`,
        );
        continue;
      }
      const converted = convertRows(rows, writerFields, {
        fields: table.fields,
        byName: table.byName,
        infer: this.#infer ? this.#options : undefined,
      });
      if ('reason' in converted) {
        verdict(converted.reason, converted.detail, converted.field);
        continue;
      }
      let minute = ingestMinute;
      if (deleting) minute = minuteKeyOf(message.timestampNumber);
      else if (this.#options.eventTimeField !== undefined && rows.length > 0) {
        const name = this.#options.eventTimeField;
        const unit = table.byName.get(name)?.epochUnit ?? this.#options.epochUnit;
        const time = parseTimestamp(rows[0]![name], unit);
        if ('invalid' in time) {
          verdict('invalid-event-time', `event-time field "${name}": ${time.invalid}`);
          continue;
        }
        // parseTimestamp keeps to years 0000-9999: every such minute key is a valid part name.
        minute = minuteKeyOf(time.ms);
      }
      takeColumns(converted.newFields, writerTypes, writerSchema);
      converted.values.forEach((values, i) => {
        builders.appendSystem(partition, message, i, key.value, deleting);
        builders.appendValues(values);
        if (this.#options.eventTimeField !== undefined) eventMinutes.push(minute);
      });
      if (converted.values.length > 0) lastStaged = message.offsetNumber;
    }
    const batch = builders.finish();
    return {
      batch,
      minute: this.#options.eventTimeField !== undefined ? eventMinutes : ingestMinute,
      earlier,
      deadLetters,
      rows: earlier.reduce((n, s) => n + s.batch.numRows, batch?.numRows ?? 0),
    };
  }
}
