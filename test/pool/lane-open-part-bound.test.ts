import * as path from 'node:path';
import type { RawMessage } from '../../src/decode/raw-message';
import type { WorkerReply } from '../../src/pool/protocol';
import { readSealedRows, tempDir } from '../support/rows';
import { openRoutingLane } from '../support/routing-lane';

/**
 * A routing lane's open-part bound is shared by all its tables: a lane with more active
 * tables than `maxOpenParts` must still answer every sync (a part waiting for a file slot
 * is given one: the lane's oldest open parts are sealed), and everything staged ends durable.
 */

const routeByOffset = (tables: number) => `export default {
  name: 'routed', topics: ['t'], schema: { fields: { message: 'string' } }, materializer: { enabled: false },
  route: (r: { offset: number }) => 'tbl' + (r.offset % ${tables}),
};`;

const message = (offset: number): RawMessage => ({
  offsetNumber: offset,
  timestampNumber: Date.now(),
  key: null,
  value: Buffer.from(JSON.stringify({ message: `m${offset}` })),
});

async function runLane(tables: number, maxOpenParts: number) {
  const { dir, ask } = await openRoutingLane(
    routeByOffset(tables),
    maxOpenParts,
    await tempDir('kl-lane-bound'),
  );
  const perBatch = tables * 2;
  const rounds = 3;
  const partitions = 3;
  const syncs: WorkerReply[] = [];
  for (let round = 0; round < rounds; round++) {
    for (let partition = 0; partition < partitions; partition++) {
      const records = Array.from({ length: perBatch }, (_, i) => message(round * perBatch + i));
      const reply = await ask(
        {
          type: 'batch',
          topic: 't',
          partition,
          records,
          through: records.at(-1)!.offsetNumber,
          epoch: 0,
          schemas: [],
        },
        'batch',
      );
      expect(reply.type).toBe('batch');
    }
    syncs.push(await ask({ type: 'sync' }, 'sync'));
    expect((await ask({ type: 'flush', force: false }, 'flush')).type).toBe('flush');
  }
  const closed = await ask({ type: 'close' }, 'close');
  expect(closed.type).toBe('close');
  return { dir, syncs, last: rounds * perBatch - 1, partitions, tables };
}

async function rowsOfEveryTable(dir: string, tables: number) {
  const rows: { partition: number; offset: number }[] = [];
  for (let t = 0; t < tables; t++) {
    for (const row of await readSealedRows(path.join(dir, 'staging', `tbl${t}`)))
      rows.push({ partition: row.partition, offset: row.offset });
  }
  return rows;
}

test.each([
  [200, 64],
  [3, 2],
])(
  'a lane routing into %i tables under maxOpenParts %i answers every sync and makes every record durable',
  async (tables, maxOpenParts) => {
    const { dir, syncs, last, partitions } = await runLane(tables, maxOpenParts);
    for (const sync of syncs) {
      expect(sync.type).toBe('sync');
      // The bound holds across the lane: never more parts open for appends than it allows.
      if (sync.type === 'sync') expect(sync.parts.open).toBeLessThanOrEqual(maxOpenParts);
    }
    const final = syncs.at(-1)!;
    if (final.type !== 'sync') throw new Error('no sync reply');
    expect([...final.durable].sort((a, b) => a[1] - b[1])).toEqual(
      Array.from({ length: partitions }, (_, p) => ['t', p, last]),
    );
    const rows = await rowsOfEveryTable(dir, tables);
    expect(rows).toHaveLength(partitions * (last + 1));
    for (let p = 0; p < partitions; p++) {
      const offsets = rows
        .filter((r) => r.partition === p)
        .map((r) => r.offset)
        .sort((a, b) => a - b);
      expect(offsets).toEqual(Array.from({ length: last + 1 }, (_, i) => i));
    }
  },
);
