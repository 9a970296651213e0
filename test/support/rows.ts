import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  Field,
  Int32,
  Int64,
  RecordBatch,
  Schema,
  Struct,
  TimeUnit,
  Timestamp,
  Utf8,
  makeData,
  vectorFromArray,
  type DataType,
} from 'apache-arrow';
import { ulid } from 'ulid';
import { silentLogger } from '../../src/common/logger';
import { parseTpKey, type DurableOffset, type TopicPartitionKey } from '../../src/common/offsets';
import {
  FileLocks,
  TableStaging,
  minuteKeyOf,
  readSealedPart,
  parsePartName,
  type MinuteKey,
  type StagingEpoch,
  type TableStagingOptions,
} from '../../src/staging';

export const MESSAGE_COLUMN = 'message';
export const TEST_SCHEMA = new Schema([
  new Field('_topic', new Utf8(), false),
  new Field('_partition', new Int32(), false),
  new Field('_offset', new Int64(), false),
  new Field('_timestamp', new Timestamp(TimeUnit.MILLISECOND), false),
  new Field(MESSAGE_COLUMN, new Utf8(), true),
]);

/** A deterministic payload per record, of varying length and with non-ASCII text. */
export function payloadOf(topic: string, partition: number, offset: number): string {
  return `${topic}/${partition}/${offset} ${'x'.repeat(offset % 37)} é✓ ${(offset * 2654435761) % 1000003}`;
}

function column(values: unknown[], type: DataType) {
  return vectorFromArray(values, type).data[0]!;
}

/** A staged batch for one partition with the given offsets (increasing). */
export function rowsFor(
  topic: string,
  partition: number,
  offsets: readonly number[],
  payload: (topic: string, partition: number, offset: number) => string = payloadOf,
): RecordBatch {
  const children = [
    column(
      offsets.map(() => topic),
      new Utf8(),
    ),
    column(
      offsets.map(() => partition),
      new Int32(),
    ),
    column(
      offsets.map((o) => BigInt(o)),
      new Int64(),
    ),
    column(
      offsets.map((o) => 1_700_000_000_000 + o),
      new Timestamp(TimeUnit.MILLISECOND),
    ),
    column(
      offsets.map((o) => payload(topic, partition, o)),
      new Utf8(),
    ),
  ];
  const data = makeData({
    type: new Struct(TEST_SCHEMA.fields),
    length: offsets.length,
    nullCount: 0,
    children,
  });
  return new RecordBatch(TEST_SCHEMA, data);
}

export const range = (from: number, to: number): number[] =>
  Array.from({ length: to - from }, (_, i) => from + i);

export async function tempDir(prefix = 'kl-staging'): Promise<string> {
  return fsp.mkdtemp(path.join(os.tmpdir(), `${prefix}-`));
}

export const FIXED_NOW = Date.UTC(2026, 10, 30, 12, 0, 30);
export const MINUTE: MinuteKey = minuteKeyOf(FIXED_NOW);

export interface StagingHarness {
  readonly staging: TableStaging;
  readonly locks: FileLocks;
  readonly tableDir: string;
  readonly clock: { now: number };
}

export async function openStaging(
  tableDir: string,
  {
    highWaters,
    ...overrides
  }: Partial<TableStagingOptions> & {
    /** Per partition, offsets already staged or committed (raised as an assignment raises them). */
    readonly highWaters?: ReadonlyMap<TopicPartitionKey, DurableOffset>;
  } = {},
): Promise<StagingHarness> {
  const clock = { now: FIXED_NOW };
  const locks = overrides.locks ?? new FileLocks();
  const epoch: StagingEpoch = overrides.epoch ?? { owner: ulid(), epoch: 1 };
  const staging = await TableStaging.open({
    tableDir,
    table: 'events',
    locks,
    owner: 'test-writer',
    logger: silentLogger(),
    maxPartBytes: 64 * 1024 * 1024,
    maxPartAgeMs: 60_000,
    clock: () => clock.now,
    ...overrides,
    epoch,
  });
  for (const [key, offset] of highWaters ?? []) {
    const { topic, partition } = parseTpKey(key);
    staging.raiseHighWater(topic, partition, offset);
  }
  return { staging, locks, tableDir, clock };
}

export interface StagedRow {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly message: string | null;
  readonly epoch: StagingEpoch;
  readonly file: string;
}

/** Every row of every sealed part in a table directory. */
export async function readSealedRows(tableDir: string): Promise<StagedRow[]> {
  const rows: StagedRow[] = [];
  for (const name of (await fsp.readdir(tableDir)).sort()) {
    if (parsePartName(name)?.state !== 'sealed') continue;
    const file = path.join(tableDir, name);
    const { part, batches } = await readSealedPart(file);
    for (const batch of batches) {
      for (let i = 0; i < batch.numRows; i++) {
        rows.push({
          topic: batch.getChild('_topic')!.get(i) as string,
          partition: batch.getChild('_partition')!.get(i) as number,
          offset: Number(batch.getChild('_offset')!.get(i) as bigint),
          message: batch.getChild(MESSAGE_COLUMN)!.get(i) as string | null,
          epoch: part.epoch,
          file,
        });
      }
    }
  }
  return rows;
}

export async function partFiles(tableDir: string, state: 'open' | 'sealed'): Promise<string[]> {
  return (await fsp.readdir(tableDir)).filter((n) => parsePartName(n)?.state === state).sort();
}
