import { SYSTEM_FIELDS } from '../../src/staging/system-columns';
import { RecordDecoder, type RawMessage } from '../../src/decode/record-decoder';
import type { DecoderOptions } from '../../src/decode/record-decoder';

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);
const enc = (s: string) => new TextEncoder().encode(s);
const msg = (offset: number, value: string | Uint8Array | null, key: string | null = null): RawMessage => ({
  offsetNumber: offset,
  timestampNumber: NOW + offset,
  key: key === null ? null : enc(key),
  value: value === null ? null : typeof value === 'string' ? enc(value) : value,
});

const explicit: DecoderOptions = {
  format: 'json',
  fields: [
    { name: 'n', type: 'int64', nullable: false },
    { name: 'name', type: 'string', nullable: true },
    { name: 'score', type: 'float64', nullable: true },
    { name: 'ok', type: 'boolean', nullable: true },
    { name: 'at', type: 'timestamp', nullable: true },
    { name: 'small', type: 'int32', nullable: true },
    { name: 'extra', type: 'json', nullable: true },
  ],
  transform: undefined,
  eventTimeField: undefined,
  includeKey: false,
  maxRecordBytes: 1024,
  tombstones: 'dead-letter',
  epochUnit: 'ms',
  maxInferredColumns: 256,
};

function column(batch: NonNullable<ReturnType<RecordDecoder['decode']>['batch']>, name: string): unknown[] {
  const c = batch.getChild(name)!;
  return Array.from({ length: batch.numRows }, (_, i) => c.get(i) as unknown);
}

describe('RecordDecoder', () => {
  test('fills every declared type, with nulls, and the system columns', () => {
    const d = new RecordDecoder(explicit, () => NOW);
    const out = d.decode('t', 3, [
      msg(
        10,
        '{"n":1,"name":"ä✓","score":1.5,"ok":true,"at":"2026-11-30T12:00:00.000Z","small":7,"extra":{"a":[1]}}',
      ),
      msg(11, '{"n":"9007199254740993","name":null}'),
    ]);
    expect(out.deadLetters).toEqual([]);
    const b = out.batch!;
    expect(b.schema.fields.map((f) => f.name)).toEqual([
      '_topic',
      '_partition',
      '_offset',
      '_timestamp',
      '_topic_id',
      'n',
      'name',
      'score',
      'ok',
      'at',
      'small',
      'extra',
    ]);
    expect(column(b, '_topic')).toEqual(['t', 't']);
    expect(column(b, '_partition')).toEqual([3, 3]);
    expect(column(b, '_offset')).toEqual([10n, 11n]);
    expect(column(b, 'n')).toEqual([1n, 9007199254740993n]);
    expect(column(b, 'name')).toEqual(['ä✓', null]);
    expect(column(b, 'score')).toEqual([1.5, null]);
    expect(column(b, 'ok')).toEqual([true, null]);
    expect(column(b, 'small')).toEqual([7, null]);
    expect(column(b, 'extra')).toEqual(['{"a":[1]}', null]);
    expect(Number(column(b, 'at')[0])).toBe(Date.parse('2026-11-30T12:00:00.000Z'));
  });

  test.each([
    ['invalid-json', msg(1, '{"n":')],
    ['invalid-json', msg(1, '')],
    ['invalid-utf8', msg(1, Uint8Array.of(0x7b, 0x22, 0xc3))],
    ['not-an-object', msg(1, '[1,2]')],
    ['schema-mismatch', msg(1, '{"n":1,"name":5}')],
    ['schema-mismatch', msg(1, '{"name":"no n"}')],
    ['schema-mismatch', msg(1, '{"n":1,"small":3000000000}')],
    ['too-large', msg(1, `{"n":1,"name":"${'x'.repeat(2000)}"}`)],
    ['tombstone', msg(1, null)],
  ])(
    'a record that cannot be staged is a dead letter with reason %s, and its neighbours are staged',
    (reason, bad) => {
      const d = new RecordDecoder(explicit, () => NOW);
      const out = d.decode('t', 0, [msg(0, '{"n":0}'), bad, msg(2, '{"n":2}')]);
      expect(out.deadLetters).toEqual([expect.objectContaining({ offset: 1, reason })]);
      expect(out.deadLetters[0]!.detail.length).toBeGreaterThan(0);
      expect(column(out.batch!, 'n')).toEqual([0n, 2n]);
    },
  );

  test('tombstones can be ignored by policy: handled, neither staged nor dead-lettered', () => {
    const d = new RecordDecoder({ ...explicit, tombstones: 'ignore' }, () => NOW);
    const out = d.decode('t', 0, [msg(0, null), msg(1, '{"n":1}')]);
    expect(out.deadLetters).toEqual([]);
    expect(out.rows).toBe(1);
  });

  test('infer: new keys become nullable columns (backfilled), a conflicting kind is a dead letter', () => {
    const d = new RecordDecoder({ ...explicit, fields: undefined }, () => NOW);
    const first = d.decode('t', 0, [msg(0, '{"a":"x"}'), msg(1, '{"a":"y","b":2}'), msg(2, '{"a":5}')]);
    expect(first.deadLetters).toEqual([expect.objectContaining({ offset: 2, reason: 'schema-mismatch' })]);
    expect(column(first.batch!, 'a')).toEqual(['x', 'y']);
    expect(column(first.batch!, 'b')).toEqual([null, 2]);
    // The inferred fields persist: the next batch has them even when absent.
    const second = d.decode('t', 0, [msg(3, '{"c":true}')]);
    expect(second.batch!.schema.fields.map((f) => f.name).slice(SYSTEM_FIELDS.length)).toEqual([
      'a',
      'b',
      'c',
    ]);
    expect(column(second.batch!, 'a')).toEqual([null]);
  });

  test('event time: minutes per row from the field; an unparseable time is a dead letter', () => {
    const d = new RecordDecoder({ ...explicit, eventTimeField: 'at' }, () => NOW);
    const out = d.decode('t', 0, [
      msg(0, '{"n":0,"at":"2026-01-01T00:00:30Z"}'),
      msg(1, '{"n":1,"at":"yesterday"}'),
      msg(2, '{"n":2,"at":1767225720000}'),
    ]);
    expect(out.minute).toEqual(['202601010000', '202601010002']);
    expect(out.deadLetters.map((x) => x.reason)).toEqual(['schema-mismatch']);
  });

  test('a transform returning several rows numbers them in _row; a throwing transform is a dead letter', () => {
    const d = new RecordDecoder(
      {
        ...explicit,
        fields: [{ name: 'item', type: 'string', nullable: true }],
        transform: (r) => {
          const v = r.value as { items?: string[] };
          if (!v.items) throw new Error('no items');
          return v.items.map((item) => ({ item }));
        },
      },
      () => NOW,
    );
    const out = d.decode('t', 0, [msg(0, '{"items":["a","b"]}'), msg(1, '{}'), msg(2, '{"items":[]}')]);
    expect(column(out.batch!, 'item')).toEqual(['a', 'b']);
    expect(column(out.batch!, '_row')).toEqual([0, 1]);
    expect(column(out.batch!, '_offset')).toEqual([0n, 0n]);
    expect(out.deadLetters).toEqual([
      expect.objectContaining({ offset: 1, reason: 'transform-failed', detail: 'no items' }),
    ]);
  });

  test('raw format keeps key and value bytes, and _key when asked', () => {
    const d = new RecordDecoder(
      { ...explicit, format: 'raw', fields: undefined, includeKey: true },
      () => NOW,
    );
    const out = d.decode('t', 0, [msg(0, Uint8Array.of(0, 255, 1), 'k1'), msg(1, Uint8Array.of(), null)]);
    expect(out.batch!.schema.fields.map((f) => f.name)).toEqual([
      '_topic',
      '_partition',
      '_offset',
      '_timestamp',
      '_topic_id',
      '_key',
      'key',
      'value',
    ]);
    expect(Array.from(column(out.batch!, 'value')[0] as Uint8Array)).toEqual([0, 255, 1]);
    expect(column(out.batch!, 'key')[1]).toBeNull();
  });
});
