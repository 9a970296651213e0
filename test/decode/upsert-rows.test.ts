import { resolveConsumer } from '../../src/config';
import { RecordDecoder } from '../../src/decode/record-decoder';
import { column, msg, NOW } from './fixture';

const decoderFor = (extra: Record<string, unknown>) =>
  new RecordDecoder(
    resolveConsumer(
      {
        name: 'docs',
        brokers: ['b:1'],
        topics: ['docs'],
        schema: { fields: { title: { type: 'string', nullable: false } } },
        mode: 'upsert',
        ...extra,
      },
      'test',
    ),
    () => NOW,
  );

test('upsert on the record key: a tombstone is a _deleted row of its key, a keyless record a dead letter, _key never null', () => {
  const decoded = decoderFor({ key: 'record-key', keyFormat: 'string' }).decode('docs', 0, [
    msg(0, '{"title":"a"}', 'k1'),
    msg(1, null, 'k1'),
    msg(2, '{"title":"b"}', null),
    msg(3, null, null),
  ]);
  expect(decoded.deadLetters.map((d) => [d.offset, d.reason])).toEqual([
    [2, 'missing-key'],
    [3, 'missing-key'],
  ]);
  const batch = decoded.batch!;
  expect(column(batch, '_key')).toEqual(['k1', 'k1']);
  expect(column(batch, '_deleted')).toEqual([false, true]);
  expect(column(batch, 'title')).toEqual(['a', null]);
  expect(batch.schema.fields.find((f) => f.name === '_key')!.nullable).toBe(false);
  // A delete's row has no values, so the data columns are nullable in the staged schema.
  expect(batch.schema.fields.find((f) => f.name === 'title')!.nullable).toBe(true);
});

test('upsert on key fields: a record without a key field is a dead letter naming it; tombstones stay dead letters', () => {
  const decoded = decoderFor({
    key: { fields: ['id'] },
    schema: { fields: { id: 'int64', title: 'string' } },
  }).decode('docs', 0, [msg(0, '{"id":1,"title":"a"}'), msg(1, '{"title":"no id"}'), msg(2, null, 'x')]);
  expect(decoded.deadLetters.map((d) => [d.offset, d.reason, d.field])).toEqual([
    [1, 'schema-mismatch', 'id'],
    [2, 'tombstone', undefined],
  ]);
  expect(column(decoded.batch!, '_deleted')).toEqual([false]);
  expect(decoded.batch!.schema.fields.find((f) => f.name === 'id')!.nullable).toBe(false);
});
