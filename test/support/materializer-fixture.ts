import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';
import { createLogger, silentLogger, type Logger } from '../../src/common/logger';
import { recordOffset, tpKey, type TopicPartitionKey } from '../../src/common/offsets';
import type { ChainEntry } from '../../src/ownership/chain';
import { Materializer, type MaterializerOptions } from '../../src/materializer/materializer';
import type { PartitionOwnership } from '../../src/ownership/partition-ownership';
import { FileLocks, TableStaging, minuteKeyOf, type StagingEpoch } from '../../src/staging';
import { Field, Float64, RecordBatch, Schema, Struct, Utf8, makeData, vectorFromArray } from 'apache-arrow';
import { payloadOf, range, rowsFor } from './rows';

export const TOPIC = 'mat';
export const TABLE = 'events';

/** A staging of the fixture table that seals only when told to (flush/close). */
export function openFixtureStaging(
  tableDir: string,
  epoch: StagingEpoch = { owner: 'A', epoch: 1 },
): Promise<TableStaging> {
  return TableStaging.open({
    tableDir,
    table: TABLE,
    locks: new FileLocks(),
    owner: 'fixture',
    logger: silentLogger(),
    maxPartBytes: 1 << 30,
    maxPartAgeMs: 1 << 30,
    epoch,
  });
}

/** Stages `perPartition` rows in each partition as sealed parts of about `rowsPerPart` rows, by `owner`/`epoch`. */
export async function stageRows(
  tableDir: string,
  options: {
    partitions: number;
    perPartition: number;
    rowsPerPart: number;
    owner?: string;
    epoch?: number;
    from?: number;
  },
): Promise<void> {
  const staging = await openFixtureStaging(tableDir, {
    owner: options.owner ?? 'A',
    epoch: options.epoch ?? 1,
  });
  const from = options.from ?? 0;
  for (let start = from; start < from + options.perPartition; start += options.rowsPerPart) {
    const end = Math.min(from + options.perPartition, start + options.rowsPerPart);
    for (let p = 0; p < options.partitions; p++) {
      staging.push({
        topic: TOPIC,
        partition: p,
        batch: rowsFor(TOPIC, p, range(start, end)),
        minute: minuteKeyOf(Date.UTC(2026, 10, 30, 12)),
        handledThrough: recordOffset(end - 1),
      });
    }
    await staging.flush({ force: true });
  }
  await staging.close();
}

/**
 * Stages rows [from, to) of one partition with one extra column, sealed: how two
 * staging workers that inferred different types (or a key Lance refuses) look on disk.
 */
export async function stageWithColumn(
  tableDir: string,
  options: { partition: number; from: number; to: number; column: string; type: 'float64' | 'utf8' },
): Promise<void> {
  const offsets = range(options.from, options.to);
  const base = rowsFor(TOPIC, options.partition, offsets);
  const type = options.type === 'float64' ? new Float64() : new Utf8();
  const schema = new Schema([...base.schema.fields, new Field(options.column, type, true)]);
  const values = offsets.map((o) => (options.type === 'float64' ? o / 2 : `v${o}`));
  const batch = new RecordBatch(
    schema,
    makeData({
      type: new Struct(schema.fields),
      length: offsets.length,
      nullCount: 0,
      children: [...base.data.children, vectorFromArray(values, type).data[0]!],
    }),
  );
  const staging = await openFixtureStaging(tableDir);
  staging.push({
    topic: TOPIC,
    partition: options.partition,
    batch,
    minute: minuteKeyOf(Date.UTC(2026, 10, 30, 12)),
    handledThrough: recordOffset(options.to - 1),
  });
  await staging.close();
}

/** A logger that keeps what it logs (JSON objects), for asserting on errors. */
export function capturingLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger(
    { level: 'info' },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { logger, lines };
}

export function ownershipOf(
  partitions: number,
  chain: readonly ChainEntry[],
  committed: number,
): Map<TopicPartitionKey, PartitionOwnership> {
  return new Map(Array.from({ length: partitions }, (_, p) => [tpKey(TOPIC, p), { chain, committed }]));
}

export function materializerOptions(
  tableDir: string,
  lanceDir: string,
  extra: Partial<MaterializerOptions> = {},
): MaterializerOptions {
  return {
    tableDir,
    lance: { uri: lanceDir, table: TABLE },
    owner: 'materializer-test',
    mode: 'buffered',
    maxPublicationBytes: 64 * 1024 * 1024,
    maxPublicationDelayMs: 0,
    fetchPermits: 2,
    decodePermits: 2,
    sourceReservationBytes: 256 * 1024 * 1024,
    logger: silentLogger(),
    ...extra,
  };
}

export async function openMaterializer(
  tableDir: string,
  lanceDir: string,
  extra: Partial<MaterializerOptions> = {},
) {
  return Materializer.open(materializerOptions(tableDir, lanceDir, extra));
}

export interface LanceRow {
  readonly partition: number;
  readonly offset: number;
  readonly message: string | null;
}

export async function readLance(lanceDir: string, table = TABLE): Promise<LanceRow[]> {
  const db = await lancedb.connect(lanceDir);
  const t = await openTableIfCommitted(db, table);
  if (!t) return [];
  const rows = (await t.query().select(['_partition', '_offset', 'message']).toArray()) as {
    _partition: number;
    _offset: bigint;
    message: string | null;
  }[];
  t.close();
  db.close();
  return rows.map((r) => ({ partition: r._partition, offset: Number(r._offset), message: r.message }));
}

/** Each (partition, offset) in [0, below) exactly once, with its payload. */
export function expectExactly(
  rows: readonly LanceRow[],
  partitions: number,
  below: (p: number) => number,
): void {
  const seen = new Set<string>();
  for (const r of rows) {
    const key = `${r.partition}:${r.offset}`;
    if (seen.has(key)) throw new Error(`row ${key} published twice`);
    seen.add(key);
    if (r.offset >= below(r.partition))
      throw new Error(`row ${key} is above its ceiling ${below(r.partition)}`);
    if (r.message !== payloadOf(TOPIC, r.partition, r.offset)) throw new Error(`row ${key} has other bytes`);
  }
  let expected = 0;
  for (let p = 0; p < partitions; p++) expected += below(p);
  if (seen.size !== expected) throw new Error(`${seen.size} rows published, ${expected} expected`);
}

export async function sealedPartCount(tableDir: string): Promise<number> {
  return (await fsp.readdir(tableDir)).filter((n) => n.endsWith('.arrows')).length;
}

export async function ledgerFiles(tableDir: string): Promise<string[]> {
  return fsp.readdir(path.join(tableDir, 'plans')).catch(() => []);
}
