import { resolveConsumer } from '../../src/config';
import { RecordDecoder } from '../../src/decode/record-decoder';
import { placeholderIn, readChangeEvent } from '../../src/decode/debezium-envelope';
import { column, msg, NOW } from './fixture';

/**
 * Debezium change events (JSON, with and without schemas.enable) as staged rows of an upsert
 * table keyed on the primary key's columns: c/r/u write `after`, d a `_deleted` row of the
 * key (from `before`, or the record key), a tombstone a `_deleted` row of its record key, a truncate
 * a `_deleted` row without a key (or, refused by the definition, a dead letter), and a TOASTed placeholder in a column that is not a string a dead letter with its reason; in a
 * string column the placeholder is staged for the merge to replace with the stored value.
 */
const decoder = (truncate?: 'apply' | 'dead-letter') =>
  new RecordDecoder(
    resolveConsumer(
      {
        ...(truncate ? { truncate } : {}),
        name: 'customers',
        brokers: ['b:1'],
        topics: ['pg.public.customers'],
        schema: {
          fields: { id: 'int64', name: { type: 'string', nullable: false }, note: 'string', visits: 'int64' },
        },
        mode: 'upsert',
        key: { fields: ['id'] },
        envelope: 'debezium',
      },
      'test',
    ),
    () => NOW,
  );

const event = (op: string, before: unknown, after: unknown) =>
  JSON.stringify({ before, after, source: { lsn: 100 }, op, ts_ms: NOW });
const withSchema = (payload: string) =>
  JSON.stringify({
    schema: { type: 'struct', fields: [], optional: false },
    payload: JSON.parse(payload) as unknown,
  });

test('create, snapshot read, update and delete, with and without schemas.enable, become rows and a delete row', () => {
  const decoded = decoder().decode('pg.public.customers', 0, [
    msg(0, event('r', null, { id: 1, name: 'Ann', note: 'snap' })),
    msg(1, withSchema(event('c', null, { id: 2, name: 'Bob', note: null }))),
    msg(2, event('u', { id: 1, name: 'Ann', note: 'snap' }, { id: 1, name: 'Ann B', note: 'edited' })),
    msg(3, withSchema(event('d', { id: 2, name: 'Bob', note: null }, null))),
    msg(4, null, '{"id":2}'),
  ]);
  expect(decoded.deadLetters).toEqual([]);
  const batch = decoded.batch!;
  // The tombstone after the delete deletes the key again: harmless, and on a compacted topic all there is.
  expect(column(batch, 'id')).toEqual([1n, 2n, 1n, 2n, 2n]);
  expect(column(batch, 'name')).toEqual(['Ann', 'Bob', 'Ann B', null, null]);
  expect(column(batch, '_deleted')).toEqual([false, false, false, true, true]);
  expect(column(batch, '_offset')).toEqual([0n, 1n, 2n, 3n, 4n]);
  // The key column is the table's primary key: never null; the others take a delete's nulls.
  expect(
    batch.schema.fields.filter((f) => !f.nullable && !f.name.startsWith('_')).map((f) => f.name),
  ).toEqual(['id']);
});

test('a delete without "before" (REPLICA IDENTITY NOTHING) takes its key from the record key, with or without its schema', () => {
  const decoded = decoder().decode('pg.public.customers', 0, [
    msg(0, event('d', null, null), '{"id":7}'),
    msg(1, event('d', null, null), withSchema('{"id":8}')),
    msg(2, event('d', null, null), null),
  ]);
  expect(column(decoded.batch!, 'id')).toEqual([7n, 8n]);
  expect(column(decoded.batch!, '_deleted')).toEqual([true, true]);
  expect(decoded.deadLetters.map((d) => [d.offset, d.reason])).toEqual([[2, 'missing-key']]);
});

test('a truncate refused by the definition, a TOASTed placeholder in a column that is not a string or in a create (a primary-key update), and a value that is no change event are dead letters with their reasons', () => {
  const decoded = decoder('dead-letter').decode('pg.public.customers', 0, [
    msg(0, event('t', null, null)),
    msg(1, event('u', null, { id: 1, name: 'Ann', visits: '__debezium_unavailable_value' })),
    msg(2, '{"id":1,"name":"plain row"}'),
    msg(3, event('m', null, null)),
    // The create of a primary-key update (REPLICA IDENTITY DEFAULT): the value was the old key's.
    msg(4, event('c', null, { id: 7, name: 'Ann', note: '__debezium_unavailable_value' })),
  ]);
  expect(decoded.deadLetters.map((d) => [d.offset, d.reason, d.field])).toEqual([
    [0, 'debezium-truncate', undefined],
    [1, 'unavailable-value', 'visits'],
    [2, 'not-a-change-event', undefined],
    [3, 'not-a-change-event', undefined],
    [4, 'unavailable-value', 'note'],
  ]);
  expect(decoded.batch).toBeUndefined();
});

test('a TOASTed placeholder in a string column is staged as it is, for the merge to keep the stored value', () => {
  const decoded = decoder().decode('pg.public.customers', 0, [
    msg(1, event('u', null, { id: 1, name: 'Ann', note: '__debezium_unavailable_value' })),
  ]);
  expect(decoded.deadLetters).toEqual([]);
  expect(column(decoded.batch!, 'note')).toEqual(['__debezium_unavailable_value']);
});

test('compacted topic: a tombstone whose delete event the cleaner removed still deletes its key, read from the record key', () => {
  // What a replica reading after the cleaner sees of key 5: its last upsert's tombstone only.
  const decoded = decoder().decode('pg.public.customers', 0, [
    msg(10, null, '{"id":5}'),
    msg(11, null, withSchema('{"id":6}')),
    msg(12, null, null),
    msg(13, null, '{"other":1}'),
  ]);
  expect(column(decoded.batch!, 'id')).toEqual([5n, 6n]);
  expect(column(decoded.batch!, '_deleted')).toEqual([true, true]);
  expect(column(decoded.batch!, '_offset')).toEqual([10n, 11n]);
  expect(decoded.deadLetters.map((d) => [d.offset, d.reason])).toEqual([
    [12, 'missing-key'],
    [13, 'missing-key'],
  ]);
});

test('a truncate is a dead letter unless the definition says truncate: "apply" (the rows stay)', () => {
  const decoded = decoder().decode('pg.public.customers', 0, [msg(0, event('t', null, null), null)]);
  expect(decoded.deadLetters.map((d) => d.reason)).toEqual(['debezium-truncate']);
  expect(decoded.batch).toBeUndefined();
});

test('a truncate applied is staged as a delete row without a key, in its place among the rows', () => {
  const decoded = decoder('apply').decode('pg.public.customers', 0, [
    msg(0, event('c', null, { id: 1, name: 'Ann', note: null })),
    msg(1, event('t', null, null), null),
    msg(2, event('c', null, { id: 2, name: 'Bob', note: null })),
  ]);
  expect(decoded.deadLetters).toEqual([]);
  expect(column(decoded.batch!, 'id')).toEqual([1n, null, 2n]);
  expect(column(decoded.batch!, '_deleted')).toEqual([false, true, false]);
  expect(column(decoded.batch!, '_offset')).toEqual([0n, 1n, 2n]);
});

test('truncate outside the Debezium envelope stops the start, naming the field', () => {
  expect(() =>
    resolveConsumer(
      {
        name: 'plain',
        brokers: ['b:1'],
        topics: ['t'],
        schema: { fields: { id: 'int64' } },
        mode: 'upsert',
        key: { fields: ['id'] },
        truncate: 'apply',
      },
      'test',
    ),
  ).toThrow(/truncate/);
});

test('a truncate applied with a sequence stages its source.lsn in _sequence (ordered against keyed rows by it)', () => {
  const decoded = new RecordDecoder(
    resolveConsumer(
      {
        name: 'customers',
        brokers: ['b:1'],
        topics: ['pg.public.customers'],
        schema: { fields: { id: 'int64', note: 'string' } },
        mode: 'upsert',
        key: { fields: ['id'] },
        envelope: 'debezium',
        truncate: 'apply',
        sequence: 'source.lsn',
      },
      'test',
    ),
    () => NOW,
  ).decode('pg.public.customers', 0, [msg(0, event('t', null, null), null)]);
  expect(decoded.deadLetters).toEqual([]);
  expect(column(decoded.batch!, 'id')).toEqual([null]);
  expect(column(decoded.batch!, '_deleted')).toEqual([true]);
  expect(column(decoded.batch!, '_sequence')).toEqual([100n]);
});

test('a placeholder whose key has no column a filter can name (a timestamp key) is a dead letter, not a read of the whole table', () => {
  const decoded = new RecordDecoder(
    resolveConsumer(
      {
        name: 'events',
        brokers: ['b:1'],
        topics: ['pg.public.events'],
        schema: { fields: { at: 'timestamp', note: 'string' } },
        mode: 'upsert',
        key: { fields: ['at'] },
        envelope: 'debezium',
      },
      'test',
    ),
    () => NOW,
  ).decode('pg.public.events', 0, [
    msg(0, event('u', null, { at: '2026-12-06T12:00:00Z', note: '__debezium_unavailable_value' })),
  ]);
  expect(decoded.deadLetters.map((d) => [d.reason, d.field])).toEqual([['unavailable-value', 'note']]);
});

/** Debezium's placeholder in the shapes its PostgreSQL connector gives columns of other types. */
const PLACEHOLDER = '__debezium_unavailable_value';
const PLACEHOLDER_BYTES = Buffer.from(PLACEHOLDER);

test("a TOASTed bytea's placeholder (base64, base64-url-safe or hex text) is staged as the placeholder for the merge to keep the stored value, never as the placeholder's bytes", () => {
  const decoded = decoder().decode(
    'pg.public.customers',
    0,
    ['base64', 'base64url', 'hex'].map((encoding, i) =>
      msg(
        i,
        event('u', null, {
          id: i,
          name: 'Ann',
          note: PLACEHOLDER_BYTES.toString(encoding as BufferEncoding),
        }),
      ),
    ),
  );
  expect(decoded.deadLetters).toEqual([]);
  expect(column(decoded.batch!, 'note')).toEqual([PLACEHOLDER, PLACEHOLDER, PLACEHOLDER]);
});

test('a TOASTed placeholder in the shape of an array, an int[] of its bytes, a uuid[] or an hstore map is a dead letter, never stored', () => {
  const shapes: unknown[] = [
    [PLACEHOLDER],
    [...PLACEHOLDER_BYTES],
    ['b68a35a7-17ad-35b3-af2a-ae46edb4545a'],
    { [PLACEHOLDER]: PLACEHOLDER },
  ];
  const decoded = new RecordDecoder(
    resolveConsumer(
      {
        name: 'customers',
        brokers: ['b:1'],
        topics: ['pg.public.customers'],
        schema: { fields: { id: 'int64', tags: 'json' } },
        mode: 'upsert',
        key: { fields: ['id'] },
        envelope: 'debezium',
      },
      'test',
    ),
    () => NOW,
  ).decode(
    'pg.public.customers',
    0,
    shapes.map((tags, i) => msg(i, event('u', null, { id: i, tags }))),
  );
  expect(decoded.batch).toBeUndefined();
  expect(decoded.deadLetters.map((d) => [d.offset, d.reason, d.field])).toEqual(
    shapes.map((_, i) => [i, 'unavailable-value', 'tags']),
  );
});

test("a TOASTed placeholder read from Avro (a bytea's bytes, a bytea[] of them, a bigint[] of its bytes, an hstore map's entries) is recognised; a value merely like it is not", () => {
  expect(placeholderIn(PLACEHOLDER_BYTES)).toBe('typed');
  expect(placeholderIn([new Uint8Array(PLACEHOLDER_BYTES)])).toBe('typed');
  expect(placeholderIn([...PLACEHOLDER_BYTES].map(BigInt))).toBe('typed');
  expect(placeholderIn([{ key: PLACEHOLDER, value: PLACEHOLDER }])).toBe('typed');
  expect(placeholderIn(PLACEHOLDER)).toBe('text');
  expect(placeholderIn(Buffer.from('__debezium_unavailable_valuE'))).toBeUndefined();
  expect(placeholderIn([PLACEHOLDER, PLACEHOLDER])).toBeUndefined();
  expect(placeholderIn({ [PLACEHOLDER]: PLACEHOLDER, other: 'x' })).toBeUndefined();
  expect(placeholderIn([...PLACEHOLDER_BYTES].slice(1))).toBeUndefined();
});

test("a bytea's placeholder in a binary column is staged as the placeholder's bytes for the merge to keep the stored value (Avro's bytes as they are, JSON's text as base64); another shape there is a dead letter", () => {
  const read = (blob: unknown) =>
    readChangeEvent(
      { op: 'u', before: null, after: { id: 1, blob }, source: { lsn: 1 } },
      () => undefined,
      ['id'],
      { takesPlaceholder: (f) => (f === 'blob' ? 'bytes' : undefined) },
    );
  expect(read(new Uint8Array(PLACEHOLDER_BYTES))).toEqual({
    kind: 'upsert',
    row: { id: 1, blob: new Uint8Array(PLACEHOLDER_BYTES) },
  });
  for (const text of [
    PLACEHOLDER_BYTES.toString('hex'),
    PLACEHOLDER_BYTES.toString('base64url'),
    PLACEHOLDER,
  ])
    expect(read(text)).toEqual({
      kind: 'upsert',
      row: { id: 1, blob: PLACEHOLDER_BYTES.toString('base64') },
    });
  expect(read([PLACEHOLDER])).toMatchObject({ reason: 'unavailable-value', field: 'blob' });
});

test("an array's placeholder in a list column is staged in its shape for the merge to keep the stored list; the placeholder's text there is a dead letter", () => {
  const read = (tags: unknown) =>
    readChangeEvent(
      { op: 'u', before: null, after: { id: 1, tags }, source: { lsn: 1 } },
      () => undefined,
      ['id'],
      { takesPlaceholder: (f) => (f === 'tags' ? 'list' : undefined) },
    );
  expect(read([PLACEHOLDER])).toEqual({ kind: 'upsert', row: { id: 1, tags: [PLACEHOLDER] } });
  expect(read([...PLACEHOLDER_BYTES])).toEqual({
    kind: 'upsert',
    row: { id: 1, tags: [...PLACEHOLDER_BYTES] },
  });
  expect(read(PLACEHOLDER)).toMatchObject({ reason: 'unavailable-value', field: 'tags' });
  expect(read({ [PLACEHOLDER]: PLACEHOLDER })).toMatchObject({ reason: 'unavailable-value', field: 'tags' });
});
