/**
 * A decode-only worker thread: the staging workers' decoder (src/decode, the bench's
 * consumer definition) over packed batches of bench records, as a staging worker
 * receives them, with nothing staged. The records are built and packed before the
 * timed loop; the loop cycles through them with fresh offsets.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { loadConsumer } from '../../src/config/load';
import { RecordDecoder } from '../../src/decode/record-decoder';
import { packMessages, unpackMessages, type PackedMessages } from '../../src/pool/packed-messages';
import { benchRecord } from '../lib/records';

interface Init {
  readonly consumerPath: string;
  readonly records: number;
  readonly partition: number;
}

const BATCH = 2_000;
const POOL_BATCHES = 8;

function main(): void {
  const port = parentPort!;
  const init = workerData as Init;
  const decoder = new RecordDecoder(loadConsumer(init.consumerPath));
  const now = Date.now();
  const pool: PackedMessages[] = [];
  for (let b = 0; b < POOL_BATCHES; b++) {
    const messages = Array.from({ length: BATCH }, (_, i) => {
      const n = b * BATCH + i;
      return {
        offset: String(n),
        timestamp: String(now),
        key: null,
        value: Buffer.from(benchRecord(n, now)),
      };
    });
    pool.push(packMessages(messages));
  }
  port.postMessage({ type: 'ready' });
  port.once('message', () => {
    let rows = 0;
    let bytes = 0;
    for (let b = 0; rows < init.records; b++) {
      const packed = pool[b % POOL_BATCHES]!;
      const messages = unpackMessages(packed).slice(0, init.records - rows);
      const decoded = decoder.decode('bench', init.partition, messages);
      if (decoded.deadLetters.length > 0) throw new Error(`${decoded.deadLetters.length} dead letters`);
      rows += decoded.rows;
      bytes += packed.data.byteLength * (messages.length / packed.count);
      port.postMessage({ type: 'progress', rows, bytes });
    }
    port.postMessage({ type: 'done', rows, bytes });
  });
}

main();
