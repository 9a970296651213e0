/**
 * Arm 3, decode-only: JSON → Arrow columns in the staging decoder, in as many worker
 * threads as a replica stages on by default on this machine (`defaultStagingWorkers`,
 * at least one: a replica without staging workers decodes on its main thread), no
 * Kafka, no disk.
 * Each worker builds and packs its records before the clock starts.
 */
import { Worker } from 'node:worker_threads';
import * as path from 'node:path';
import { defaultStagingWorkers } from '../../src/config/resolve';
import { ProgressTicker, armArgs, emit, processCpuSeconds } from '../lib/arm-protocol';

type Reply = { type: 'ready' } | { type: 'progress' | 'done'; rows: number; bytes: number };

async function main(): Promise<void> {
  const args = armArgs();
  const records = Number(args.get('records'));
  const workers = Number(args.get('workers') ?? Math.max(1, defaultStagingWorkers()));
  const ticker = new ProgressTicker();
  const rows = new Array<number>(workers).fill(0);
  const bytes = new Array<number>(workers).fill(0);
  const threads = Array.from({ length: workers }, (_, w) => {
    const share = Math.floor(records / workers) + (w < records % workers ? 1 : 0);
    return new Worker(path.join(__dirname, 'decode-worker.js'), {
      workerData: { consumerPath: args.get('consumer')!, records: share, partition: w },
    });
  });
  const ready = threads.map(
    (t) => new Promise<void>((resolve) => t.once('message', (m: Reply) => m.type === 'ready' && resolve())),
  );
  await Promise.all(ready);
  const done = threads.map(
    (t, w) =>
      new Promise<void>((resolve, reject) => {
        t.on('error', reject);
        t.on('message', (m: Reply) => {
          if (m.type === 'ready') return;
          rows[w] = m.rows;
          bytes[w] = m.bytes;
          ticker.rows = rows.reduce((a, b) => a + b, 0);
          ticker.bytes = bytes.reduce((a, b) => a + b, 0);
          if (m.type === 'done') resolve();
        });
      }),
  );
  emit({ event: 'start' });
  emit({ event: 'first', cpuSeconds: processCpuSeconds() });
  for (const t of threads) t.postMessage('go');
  await Promise.all(done);
  const cpuSeconds = processCpuSeconds();
  ticker.stop();
  emit({ event: 'done', rows: ticker.rows, bytes: ticker.bytes, cpuSeconds });
  await Promise.all(threads.map((t) => t.terminate()));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
