import type { Random } from './random';

/**
 * The records of the hostile-input campaign (qualify/steps/hostile-input.ts): for one
 * format, good records mixed with what anyone allowed to produce to the topic (or to
 * register a schema) can send. Every choice comes from the run's seed. This file holds what
 * every format shares and the JSON topic; hostile-registry-records.ts the registry formats'.
 */

export type HostileFormat = 'json' | 'avro' | 'protobuf' | 'json-schema';
export const HOSTILE_FORMATS: readonly HostileFormat[] = ['json', 'avro', 'protobuf', 'json-schema'];

/** What the campaign requires of a record's fate: a row, a dead letter, or either (but one of them). */
export type Fate = 'row' | 'dead-letter' | 'either';

export interface HostileRecord {
  readonly kind: string;
  readonly fate: Fate;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers?: Record<string, string | string[]>;
}

/** A topic's records and the parts of its consumer definition that depend on the format. */
export interface HostileTopic {
  readonly definition: Record<string, unknown>;
  /** The first records of every partition, in order (they fix the `_key` type before any hostile key). */
  readonly leading: readonly HostileRecord[];
  /** The rest, shuffled over the partitions. */
  readonly records: readonly HostileRecord[];
  /** Hostile kinds that could not be set up (a schema the registry refused), for the report. */
  readonly skipped: readonly string[];
}

/** Registers a schema under a subject of its own and returns its id (Confluent's API). */
export type Register = (
  subject: string,
  schemaType: 'AVRO' | 'PROTOBUF' | 'JSON',
  schema: string,
) => Promise<number>;

/** The broker's default `message.max.bytes` is 1,048,588 for a whole record batch. */
export const NEAR_MAX_VALUE_BYTES = 1_040_000;

export interface Volumes {
  readonly good: number;
  /** Distinct unknown schema ids in a row (one batch's worth above the decoder's 1,000). */
  readonly churn: number;
  readonly headerFloodKeys: number;
  readonly headerFloods: number;
  readonly bombDepth: number;
}

export function volumes(short: boolean): Volumes {
  return short
    ? { good: 300, churn: 1_001, headerFloodKeys: 20_000, headerFloods: 2, bombDepth: 20 }
    : { good: 5_000, churn: 3_000, headerFloodKeys: 20_000, headerFloods: 10, bombDepth: 21 };
}

export const text = (s: string) => Buffer.from(s, 'utf8');
export const INVALID_UTF8 = Buffer.from([0x7b, 0x22, 0x73, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0xff, 0x22, 0x7d]); // {"s":"\xc3(\xff"}
export const deepArrays = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
const deepObjects = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

function headerFlood(keys: number): Record<string, string> {
  const headers: Record<string, string> = {};
  for (let i = 0; i < keys; i++) headers[`h${i}`] = 'v';
  return headers;
}

export function framedValue(id: number, payload: Uint8Array, indexes?: readonly number[]): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt32BE(id, 1);
  // Protobuf: the message-index list, [0] written as the single byte 0.
  const list =
    indexes === undefined
      ? []
      : indexes.length === 1 && indexes[0] === 0
        ? [0]
        : [indexes.length * 2, ...indexes.map((i) => i * 2)];
  return Buffer.concat([header, Buffer.from(list), payload]);
}

/** Records common to every format: header floods on good values, giant values, tombstones. */
export function common(v: Volumes, good: () => Buffer, giant: () => Buffer): HostileRecord[] {
  const out: HostileRecord[] = [];
  for (let i = 0; i < v.headerFloods; i++)
    out.push({
      kind: 'header flood',
      fate: 'row',
      key: null,
      value: good(),
      headers: headerFlood(v.headerFloodKeys),
    });
  out.push({
    kind: 'repeated header key',
    fate: 'row',
    key: null,
    value: good(),
    headers: { k: Array.from({ length: 5_000 }, (_, i) => `${i}`) },
  });
  out.push({ kind: "record at the broker's maximum size", fate: 'either', key: null, value: giant() });
  out.push({ kind: 'tombstone', fate: 'dead-letter', key: null, value: null });
  return out;
}

/** Schema-id churn: the 5-byte header alone, each with an id the registry does not have. */
export function churn(v: Volumes, random: Random): HostileRecord[] {
  const base = 1_000_000_000 + random.int(0, 1_000_000);
  return Array.from({ length: v.churn }, (_, i) => ({
    kind: 'schema-id churn',
    fate: 'dead-letter' as const,
    key: null,
    value: framedValue(base + i, new Uint8Array(0)),
  }));
}

export function shuffle<T>(items: T[], random: Random): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = random.int(0, i);
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

export function jsonTopic(random: Random, v: Volumes): HostileTopic {
  let n = 0;
  const goodValue = () =>
    text(
      JSON.stringify({
        n: n++,
        s: `s${random.int(0, 1e6)}`,
        v: [1, 2, 3, 4].map(() => random.next()),
        doc: { a: [1, 'x'] },
      }),
    );
  const good = (): HostileRecord => ({
    kind: 'good',
    fate: 'row',
    key: text(`k${random.int(0, 999)}`),
    value: goodValue(),
  });
  const hostile: HostileRecord[] = [
    ...common(v, goodValue, () => text(JSON.stringify({ n: n++, s: 'x'.repeat(NEAR_MAX_VALUE_BYTES - 40) }))),
    {
      kind: 'deep nesting (arrays)',
      fate: 'either',
      key: null,
      value: text(`{"n":1,"doc":${deepArrays(100_000)}}`),
    },
    {
      kind: 'deep nesting (objects)',
      fate: 'either',
      key: null,
      value: text(`{"n":1,"doc":${deepObjects(50_000)}}`),
    },
    {
      kind: 'giant array',
      fate: 'either',
      key: null,
      value: text(`{"n":1,"doc":[${new Array(200_000).fill(7).join(',')}]}`),
    },
    {
      kind: 'giant string',
      fate: 'row',
      key: null,
      value: text(JSON.stringify({ n: 1, s: 'y'.repeat(500_000) })),
    },
    { kind: 'NaN literal', fate: 'dead-letter', key: null, value: text('{"n":NaN}') },
    {
      kind: 'Infinity (1e999) in a vector',
      fate: 'dead-letter',
      key: null,
      value: text('{"n":1,"v":[1e999,1,2,3]}'),
    },
    { kind: 'Infinity in an int64', fate: 'dead-letter', key: null, value: text('{"n":1e400}') },
    { kind: 'wrong-length vector', fate: 'dead-letter', key: null, value: text('{"n":1,"v":[1,2,3]}') },
    {
      kind: 'giant wrong-length vector',
      fate: 'dead-letter',
      key: null,
      value: text(`{"n":1,"v":[${new Array(100_000).fill(1).join(',')}]}`),
    },
    { kind: 'invalid UTF-8 value', fate: 'dead-letter', key: null, value: INVALID_UTF8 },
    { kind: 'not an object', fate: 'dead-letter', key: null, value: text('[1,2,3]') },
    {
      kind: 'key not UTF-8 (the key changes type)',
      fate: 'dead-letter',
      key: Buffer.from([0xff, 0xfe, 0x00]),
      value: goodValue(),
    },
    {
      kind: 'schema-id churn (framed bytes in a JSON topic)',
      fate: 'dead-letter',
      key: null,
      value: framedValue(123_456, new Uint8Array(0)),
    },
  ];
  return {
    definition: {
      format: 'json',
      includeKey: true,
      keyFormat: 'string',
      schema: {
        fields: {
          n: { type: 'int64', nullable: true },
          s: { type: 'string', nullable: true },
          v: { type: 'vector', dim: 4, nullable: true },
          doc: { type: 'json', nullable: true },
        },
      },
    },
    leading: [good(), good()],
    records: shuffle([...Array.from({ length: v.good }, good), ...hostile], random),
    skipped: [],
  };
}
