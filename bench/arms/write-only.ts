/**
 * Arm 2, Lance write-only (the sink limit): the bench rows decoded to Arrow before the
 * clock starts (one publication's worth, `materializer.maxPublicationBytes` = 64 MiB
 * by default), then written to a fresh Lance table with one LanceDB `add` per
 * publication, as the materializer does, until the expected row count is written.
 * The same rows are added again and again (Lance does not care); bytes are counted
 * as the JSON they came from, so MiB/s compares with the other arms.
 */
import * as lancedb from '@lancedb/lancedb';
import { Table as ArrowTable, type RecordBatch } from 'apache-arrow';
import { loadConsumer } from '../../src/config/load';
import { RecordDecoder } from '../../src/decode/record-decoder';
import { ProgressTicker, armArgs, emit, processCpuSeconds } from '../lib/arm-protocol';
import { benchRecord } from '../lib/records';

const PUBLICATION_BYTES = 64 * 1024 * 1024;
const BATCH = 2_000;

async function main(): Promise<void> {
  const args = armArgs();
  const records = Number(args.get('records'));
  const publicationBytes = Number(args.get('publication-bytes') ?? PUBLICATION_BYTES);
  const decoder = new RecordDecoder(loadConsumer(args.get('consumer')!));
  const pool: RecordBatch[] = [];
  let arrowBytes = 0;
  let jsonBytes = 0;
  let poolRows = 0;
  const now = Date.now();
  while (arrowBytes < publicationBytes) {
    const messages = Array.from({ length: BATCH }, (_, i) => {
      const value = Buffer.from(benchRecord(poolRows + i, now));
      jsonBytes += value.byteLength;
      return { offsetNumber: poolRows + i, timestampNumber: now, key: null, value };
    });
    const { batch } = decoder.decode('bench', 0, messages);
    pool.push(batch!);
    arrowBytes += batch!.data.byteLength;
    poolRows += batch!.numRows;
  }
  const jsonPerRow = jsonBytes / poolRows;
  const db = await lancedb.connect(args.get('lance')!);
  const ticker = new ProgressTicker();
  emit({ event: 'start' });
  emit({ event: 'first', cpuSeconds: processCpuSeconds() });
  let table: lancedb.Table | undefined;
  let adds = 0;
  while (ticker.rows < records) {
    const left = records - ticker.rows;
    const batches: RecordBatch[] = [];
    let rows = 0;
    for (const b of pool) {
      if (rows >= left) break;
      const take = Math.min(b.numRows, left - rows);
      batches.push(take === b.numRows ? b : b.slice(0, take));
      rows += take;
    }
    const data = new ArrowTable(batches);
    if (table) await table.add(data, { mode: 'append' });
    else table = await db.createTable('logs', data, { mode: 'create' });
    adds++;
    ticker.rows += rows;
    ticker.bytes = Math.round(ticker.rows * jsonPerRow);
  }
  const cpuSeconds = processCpuSeconds();
  ticker.stop();
  const verifiedRows = await table!.countRows();
  emit({
    event: 'done',
    rows: ticker.rows,
    bytes: ticker.bytes,
    verifiedRows,
    cpuSeconds,
    detail: { adds, rowsPerAdd: poolRows, arrowMiBPerAdd: Math.round(arrowBytes / 1024 / 1024) },
  });
  table!.close();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
