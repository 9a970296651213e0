import * as lancedb from '@lancedb/lancedb';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { resolveConsumer } from '../../src/config';
import { silentLogger } from '../../src/common/logger';
import { RecordDecoder } from '../../src/decode/record-decoder';
import { LanceTable, type LanceTarget } from '../../src/lance/lance-table';
import { tempDir } from '../support/rows';

/**
 * A key whose value spells Debezium's TOAST placeholder is a key like any other: the
 * reduction looks for placeholders only in value columns. Taken for one, it was "filled"
 * from a stored row that did not exist (null), and the merge of its publication failed on
 * every retry (a non-nullable key column), holding every row of it out of Lance.
 */
const TOPIC = 'plain.upserts';
const TOPIC_ID = 'AAAAAAAAAAAAAAAAAAAAAA';
const T0 = Date.UTC(2026, 11, 6, 12);
const PLACEHOLDER = '__debezium_unavailable_value';
const enc = (s: string) => new TextEncoder().encode(s);

let dir: string;
let target: LanceTarget;
beforeEach(async () => {
  dir = await tempDir('kl-placeholder-keys');
  target = { uri: path.join(dir, 'lance'), table: 'things' };
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

test.each([
  ['string', PLACEHOLDER, (k: unknown) => String(k)],
  [
    'binary',
    Buffer.from(PLACEHOLDER).toString('base64'),
    (k: unknown) => Buffer.from(k as Uint8Array).toString(),
  ],
] as const)(
  'a %s key that spells the placeholder lands as a key, beside the others',
  async (type, spelled, read) => {
    const decoder = new RecordDecoder(
      resolveConsumer(
        {
          name: 'things',
          brokers: ['127.0.0.1:1'],
          topics: [TOPIC],
          schema: { fields: { k: type, v: 'string' } },
          mode: 'upsert',
          key: { fields: ['k'] },
        },
        'test',
      ),
      () => T0,
    );
    const other = type === 'string' ? 'ok' : Buffer.from('ok').toString('base64');
    const decoded = decoder.decode(
      TOPIC,
      0,
      [
        {
          offsetNumber: 0,
          timestampNumber: T0,
          key: null,
          value: enc(JSON.stringify({ k: spelled, v: 'first' })),
        },
        {
          offsetNumber: 1,
          timestampNumber: T0 + 1,
          key: null,
          value: enc(JSON.stringify({ k: other, v: 'other' })),
        },
      ],
      TOPIC_ID,
    );
    expect(decoded.deadLetters).toEqual([]);
    const lance = await LanceTable.connect(target, silentLogger(), { upsertKey: ['k'] });
    try {
      await lance.append({
        batches: (async function* () {
          yield* await Promise.resolve([decoded.batch!]);
        })(),
        mode: 'upsert',
      });
    } finally {
      lance.close();
    }
    const db = await lancedb.connect(target.uri);
    try {
      const t = await db.openTable(target.table);
      const rows = (await t.query().where('_deleted = false').select(['k', 'v']).toArray()) as {
        k: unknown;
        v: string;
      }[];
      expect(rows.map((r) => [read(r.k), r.v]).sort()).toEqual([
        [PLACEHOLDER, 'first'],
        ['ok', 'other'],
      ]);
    } finally {
      db.close();
    }
  },
);
