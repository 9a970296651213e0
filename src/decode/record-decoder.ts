import { Binary, Field, Int32, RecordBatch, Schema, Struct, makeData, type Data } from 'apache-arrow';
import { errorMessage } from '../common/errors';
import type { FieldTypeName, ResolvedConsumer, Row, SourceRecord } from '../config';
import { minuteKeyOf, type MinuteKey } from '../staging/part-name';
import { SYSTEM_FIELDS } from '../staging/system-columns';
import { newBinary, newInt32, newInt64, newTimestampMs, newUtf8, type ColumnBuilder } from './column-builder';
import type { DeadLetterVerdict } from './dead-letter-reason';
import { FIELD_CODECS, INVALID, epochMillisOf, inferFieldType, type Converted } from './field-codec';

/** One Kafka message as it crosses into a worker. */
export interface RawMessage {
  readonly offset: number;
  /** Kafka timestamp, epoch ms. */
  readonly timestamp: number;
  readonly key: Uint8Array | null;
  readonly value: Uint8Array | null;
}

export interface DecodedBatch {
  /** Rows with the system columns; undefined when no record produced a row. */
  readonly batch: RecordBatch | undefined;
  /** One minute for all rows (ingest time) or one per row (event time). */
  readonly minute: MinuteKey | MinuteKey[];
  readonly deadLetters: DeadLetterVerdict[];
  readonly rows: number;
}

export type DecoderOptions = Pick<
  ResolvedConsumer,
  'format' | 'fields' | 'transform' | 'eventTimeField' | 'includeKey' | 'maxRecordBytes' | 'tombstones'
>;

interface FieldState {
  readonly name: string;
  readonly type: FieldTypeName;
  readonly nullable: boolean;
}

export const KEY_COLUMN = '_key';
/** Index of a row among the rows one record's transform produced: keeps (topic, partition, offset, _row) unique. */
export const ROW_COLUMN = '_row';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Turns Kafka messages into an Arrow batch in the table's schema, plus verdicts for
 * the records that cannot be staged. A record is converted whole before any of its
 * values is appended, so a bad record never leaves half a row behind.
 *
 * With `schema: 'infer'` the field list grows as new keys appear (new nullable
 * columns); a value whose kind conflicts with its column's inferred type is a
 * dead letter. The inferred fields persist across batches in this decoder.
 */
export class RecordDecoder {
  readonly #options: DecoderOptions;
  readonly #fields: FieldState[];
  readonly #infer: boolean;
  readonly #clock: () => number;

  constructor(options: DecoderOptions, clock: () => number = Date.now) {
    this.#options = options;
    this.#infer = options.fields === undefined;
    this.#fields =
      options.format === 'raw' && !options.transform
        ? [] // raw without transform: fixed key/value binary columns below
        : [...(options.fields ?? [])];
    this.#clock = clock;
  }

  decode(topic: string, partition: number, messages: readonly RawMessage[]): DecodedBatch {
    const deadLetters: DeadLetterVerdict[] = [];
    const raw = this.#options.format === 'raw' && !this.#options.transform;
    const builders = new Columns(
      this.#fields,
      raw,
      this.#options.includeKey,
      this.#options.transform !== undefined,
    );
    const eventMinutes: MinuteKey[] = [];
    const ingestMinute = minuteKeyOf(this.#clock());

    for (const message of messages) {
      const verdict = (reason: DeadLetterVerdict['reason'], detail: string, field?: string) =>
        deadLetters.push(
          field === undefined
            ? { offset: message.offset, reason, detail }
            : { offset: message.offset, reason, detail, field },
        );
      const size = (message.key?.byteLength ?? 0) + (message.value?.byteLength ?? 0);
      if (size > this.#options.maxRecordBytes) {
        verdict('too-large', `${size} bytes exceed maxRecordBytes ${this.#options.maxRecordBytes}`);
        continue;
      }
      if (message.value === null) {
        if (this.#options.tombstones === 'dead-letter') verdict('tombstone', 'null value (tombstone)');
        continue;
      }
      if (raw) {
        builders.appendSystem(topic, partition, message, 0);
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
          value = JSON.parse(text);
        } catch (error) {
          verdict('invalid-json', errorMessage(error));
          continue;
        }
      }
      let rows: readonly Row[];
      if (this.#options.transform) {
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
      const converted = this.#convertRows(rows);
      if ('mismatch' in converted) {
        verdict('schema-mismatch', converted.mismatch, converted.field);
        continue;
      }
      let minute = ingestMinute;
      if (this.#options.eventTimeField !== undefined && rows.length > 0) {
        const ms = epochMillisOf(rows[0]![this.#options.eventTimeField]);
        if (ms === undefined) {
          verdict(
            'invalid-event-time',
            `field "${this.#options.eventTimeField}" is not a time (epoch ms or ISO-8601)`,
          );
          continue;
        }
        minute = minuteKeyOf(ms);
      }
      for (const field of converted.newFields) builders.addField(field);
      this.#fields.push(...converted.newFields);
      converted.values.forEach((values, i) => {
        builders.appendSystem(topic, partition, message, i);
        builders.appendValues(values);
        if (this.#options.eventTimeField !== undefined) eventMinutes.push(minute);
      });
    }
    const batch = builders.finish();
    return {
      batch,
      minute: this.#options.eventTimeField !== undefined ? eventMinutes : ingestMinute,
      deadLetters,
      rows: batch?.numRows ?? 0,
    };
  }

  /** Converts every row of one record, or returns why it cannot be staged. */
  #convertRows(rows: readonly Row[]): { values: Converted[][]; newFields: FieldState[] } | Mismatch {
    const newFields: FieldState[] = [];
    const values: Converted[][] = [];
    for (const row of rows) {
      const out: Converted[] = [];
      for (const field of this.#fields) {
        const result = convertValue(field, row[field.name]);
        if (result === INVALID) return mismatch(field, row[field.name]);
        out.push(result);
      }
      if (this.#infer) {
        for (const [name, v] of Object.entries(row)) {
          if (this.#fields.some((f) => f.name === name)) continue;
          if (name.startsWith('_'))
            return { field: name, mismatch: `field "${name}": names starting with "_" are reserved` };
          let field = newFields.find((f) => f.name === name);
          if (!field) {
            const type = inferFieldType(v);
            if (type === undefined) continue; // null: the column is created once a value shows its type
            field = { name, type, nullable: true };
            newFields.push(field);
          }
          const result = convertValue(field, v);
          if (result === INVALID) return mismatch(field, v);
        }
        // Values of columns first seen in this record, in their order (filled per row below).
        for (const field of newFields) {
          const result = convertValue(field, row[field.name]);
          if (result === INVALID) return mismatch(field, row[field.name]);
          out.push(result);
        }
      }
      values.push(out);
    }
    // Rows converted before a later row added a column lack its value: pad with nulls.
    const width = this.#fields.length + newFields.length;
    for (const v of values) while (v.length < width) v.push(null);
    return { values, newFields };
  }
}

function convertValue(field: FieldState, value: unknown): Converted | typeof INVALID {
  if (value === null || value === undefined) return field.nullable ? null : INVALID;
  return FIELD_CODECS[field.type].convert(value);
}

/** Why a record does not fit the schema, and the field at fault (for reports that group by it). */
interface Mismatch {
  readonly field: string;
  readonly mismatch: string;
}

function mismatch(field: FieldState, value: unknown): Mismatch {
  const kind = value === null || value === undefined ? 'null' : Array.isArray(value) ? 'array' : typeof value;
  return {
    field: field.name,
    mismatch: `field "${field.name}": expected ${field.type}${field.nullable ? '' : ' (required)'}, got ${kind}`,
  };
}

function normalizeRows(result: Row | readonly Row[] | null | undefined): readonly Row[] {
  if (result === null || result === undefined) return [];
  const rows = Array.isArray(result) ? (result as readonly Row[]) : [result as Row];
  for (const r of rows) {
    if (r === null || typeof r !== 'object' || Array.isArray(r))
      throw new TypeError('a transform must return objects');
  }
  return rows;
}

function sourceRecord(topic: string, partition: number, m: RawMessage, value: unknown): SourceRecord {
  return {
    topic,
    partition,
    offset: m.offset,
    timestamp: m.timestamp,
    key: m.key ? Buffer.from(m.key.buffer, m.key.byteOffset, m.key.byteLength) : null,
    value:
      value instanceof Uint8Array ? Buffer.from(value.buffer, value.byteOffset, value.byteLength) : value,
  };
}

/** The builders of one batch: system columns, then data columns in field order. */
class Columns {
  readonly #topic = newUtf8();
  readonly #partition = newInt32();
  readonly #offset = newInt64();
  readonly #timestamp = newTimestampMs();
  readonly #key = newBinary();
  readonly #row = newInt32();
  readonly #data: { field: FieldState | { name: string; raw: true }; builder: ColumnBuilder }[] = [];
  #rows = 0;

  constructor(
    fields: readonly FieldState[],
    private readonly raw: boolean,
    private readonly includeKey: boolean,
    private readonly rowIndex: boolean,
  ) {
    if (raw) {
      this.#data.push({ field: { name: 'key', raw: true }, builder: newBinary() });
      this.#data.push({ field: { name: 'value', raw: true }, builder: newBinary() });
    } else {
      for (const f of fields) this.addField(f);
    }
  }

  addField(field: FieldState): void {
    const builder = FIELD_CODECS[field.type].builder();
    for (let i = 0; i < this.#rows; i++) builder.appendNull();
    this.#data.push({ field, builder });
  }

  appendSystem(topic: string, partition: number, m: RawMessage, rowIndex: number): void {
    this.#topic.appendString(topic);
    this.#partition.append(partition);
    this.#offset.append(BigInt(m.offset));
    this.#timestamp.append(BigInt(m.timestamp));
    if (this.includeKey) {
      if (m.key) this.#key.appendBytes(m.key);
      else this.#key.appendNull();
    }
    if (this.rowIndex) this.#row.append(rowIndex);
    this.#rows += 1;
  }

  appendRaw(m: RawMessage): void {
    const [key, value] = this.#data;
    if (m.key) (key!.builder as ReturnType<typeof newBinary>).appendBytes(m.key);
    else key!.builder.appendNull();
    (value!.builder as ReturnType<typeof newBinary>).appendBytes(m.value!);
  }

  appendValues(values: readonly Converted[]): void {
    values.forEach((v, i) => {
      const { field, builder } = this.#data[i]!;
      if (v === null) builder.appendNull();
      else FIELD_CODECS[(field as FieldState).type].append(builder, v);
    });
  }

  finish(): RecordBatch | undefined {
    if (this.#rows === 0) return undefined;
    const fields: Field[] = [...SYSTEM_FIELDS];
    const children: Data[] = [
      this.#topic.finish(),
      this.#partition.finish(),
      this.#offset.finish(),
      this.#timestamp.finish(),
    ];
    if (this.includeKey) {
      fields.push(new Field(KEY_COLUMN, new Binary(), true));
      children.push(this.#key.finish());
    }
    if (this.rowIndex) {
      fields.push(new Field(ROW_COLUMN, new Int32(), false));
      children.push(this.#row.finish());
    }
    for (const { field, builder } of this.#data) {
      const type = 'raw' in field ? new Binary() : FIELD_CODECS[field.type].arrowType();
      fields.push(new Field(field.name, type, 'raw' in field ? true : field.nullable));
      children.push(builder.finish());
    }
    const schema = new Schema(fields);
    return new RecordBatch(
      schema,
      makeData({ type: new Struct(fields), length: this.#rows, nullCount: 0, children }),
    );
  }
}
