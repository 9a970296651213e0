/**
 * What 'published' commit mode costs per publication: LanceTable.append as a plain add
 * ('append') against an insert-if-absent merge on the row key ('insert-if-absent'), on
 * a local table that already holds N rows (created by LanceTable, so with its BTree on
 * _offset and bitmap on _partition, then compacted). Five publications of each size
 * per arm, medians printed.
 *
 *   npm run build && node dist/bench/insert-if-absent-cost.js [--rows 3000000] [--dir /tmp/x]
 */
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { silentLogger } from '../src/common/logger';
import { LanceTable, type LanceTarget } from '../src/lance/lance-table';
import { TEST_SCHEMA, range, rowsFor } from '../test/support/rows';
import { arg } from './lib/args';

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const total = Number(arg('rows', '3000000'));
  const dir = arg('dir', await fsp.mkdtemp(path.join(os.tmpdir(), 'kl-insert-cost-')));
  const target: LanceTarget = { uri: path.join(dir, 'lance'), table: 'logs' };
  const table = await LanceTable.connect(target, silentLogger());
  await table.ensureSchema(TEST_SCHEMA);
  const db = await lancedb.connect(target.uri);
  const raw = await db.openTable('logs');
  const chunk = 250_000;
  for (let from = 0; from < total; from += chunk) {
    const batch = rowsFor('events', (from / chunk) % 4, range(from, Math.min(total, from + chunk)));
    await raw.add({ schema: batch.schema, batches: [batch] } as never);
  }
  await raw.optimize();
  console.log(
    `table: ${await raw.countRows()} rows, indexes ${(await raw.listIndices()).map((i) => i.name).join(', ')}`,
  );
  let next = total;
  for (const size of [1_000, 10_000]) {
    const times: Record<'append' | 'insert-if-absent', number[]> = { append: [], 'insert-if-absent': [] };
    for (let round = 0; round < 5; round++) {
      for (const mode of ['append', 'insert-if-absent'] as const) {
        const from = next;
        next += size;
        const t0 = performance.now();
        await table.append({
          batches: (async function* () {
            yield await Promise.resolve(rowsFor('events', 5, range(from, from + size)));
          })(),
          mode: mode,
        });
        times[mode].push(performance.now() - t0);
      }
    }
    console.log(
      `${size} rows per publication on ${total} rows: append median ${median(times.append).toFixed(1)} ms, insert-if-absent median ${median(times['insert-if-absent']).toFixed(1)} ms (${times['insert-if-absent'].map((t) => t.toFixed(0)).join(', ')})`,
    );
  }
  raw.close();
  db.close();
  table.close();
  if (!process.argv.includes('--dir')) await fsp.rm(dir, { recursive: true, force: true });
}

void main();
