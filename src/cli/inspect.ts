import { createReadStream, promises as fsp } from 'node:fs';
import * as path from 'node:path';
import type * as lancedb from '@lancedb/lancedb';
import type { Admin } from 'kafkajs';
import { silentLogger } from '../common/logger';
import type { ResolvedConsumer } from '../config';
import { indexName } from '../config/index-spec';
import { createKafka } from '../kafka/protocol/client';
import { groupTopics } from '../kafka/group-topics';
import { ledger } from '../materializer/ledger';
import { parsePartName } from '../staging/part-name';
import { QUARANTINE_DIR } from '../staging/quarantine';
import { DELETED_COLUMN } from '../staging/system-columns';
import { tableStagingDir } from '../staging/table-staging';
import { BrokerUnreachableError, TableMissingError } from './errors';
import { committedOffsets, connectAdmin, partitionKey, topicEnds, type PartitionEnds } from './kafka-admin';
import {
  datasetPathOf,
  lanceUriOf,
  maxOffset,
  openExistingTable,
  partitionFilter,
  tableShape,
  type IndexShape,
  type TableShape,
} from './lance-read';
import { tableSummaries, type TableSummary } from './tables';

export interface PartitionReport {
  readonly topic: string;
  readonly partition: number;
  /** Rows of this partition in the Lance table. */
  readonly lanceRows: number;
  /** Highest `_offset` published into Lance; null when none. */
  readonly lanceMaxOffset: number | null;
  /** The group's committed offset (the next record it will read); null when it never committed. */
  readonly committed: number | null;
  readonly logStart: number;
  readonly logEnd: number;
  /** Records not yet committed by the group: log end − committed (from the log start when nothing is committed). */
  readonly lag: number;
}

export interface FileGroup {
  readonly count: number;
  readonly bytes: number;
}

export interface InspectReport {
  readonly consumer: {
    readonly name: string;
    readonly source: string;
    readonly groupId: string;
    readonly topics: readonly string[];
  };
  readonly dataDir: string;
  readonly lance: {
    readonly uri: string;
    readonly table: string;
    readonly path: string;
    readonly exists: boolean;
  } & Partial<TableShape>;
  /** Names of the indexes the definition declares. */
  readonly declaredIndexes: readonly string[];
  /** How rows go in: append, or upsert on a key (docs/upserts-and-cdc.md). */
  readonly mode: {
    readonly mode: 'append' | 'upsert';
    /** Upsert: the key's columns (`_key` is the record key). */
    readonly key?: readonly string[];
    readonly tombstones: string;
    /** Upsert, table created: rows readers see (`_deleted = false`) and deletes kept as rows. */
    readonly liveRows?: number;
    readonly deletedRows?: number;
  };
  readonly kafka: {
    readonly brokers: readonly string[];
    readonly reachable: boolean;
    readonly error?: string;
    /** Topics of the definition that the broker does not have. */
    readonly missingTopics: readonly string[];
  };
  readonly partitions: readonly PartitionReport[];
  readonly staging: {
    readonly dir: string;
    readonly open: FileGroup;
    readonly sealed: FileGroup;
    readonly quarantined: FileGroup;
  };
  readonly publications: {
    readonly dir: string;
    readonly planned: number;
    readonly writing: number;
    readonly published: number;
    readonly entries: readonly {
      readonly id: string;
      readonly state: 'planned' | 'writing' | 'published';
      readonly rows: number;
      readonly parts: number;
    }[];
  };
  /** Every table of the definition (a routing definition has many): lag and last publication each. */
  readonly tables: readonly TableSummary[];
  readonly deadLetters: {
    readonly sink: 'topic' | 'file';
    readonly target: string;
    readonly count: number | null;
    readonly note?: string;
  };
}

/**
 * Everything an operator asks about one consumer, read without changing anything:
 * the Lance table, per partition what is published vs committed vs in the log, the
 * staging files and publication ledger on disk, and the dead letters.
 */
export async function inspect(consumer: ResolvedConsumer): Promise<InspectReport> {
  const uri = lanceUriOf(consumer);
  const stagingDir = tableStagingDir(consumer.dataDir, consumer.table);
  const { admin, error: kafkaError } = await tryConnect(consumer);
  try {
    const topics = admin ? await topicsOf(admin, consumer) : (consumer.topics ?? []);
    const opened = await openExistingTable(consumer).catch((error: unknown) => {
      if (error instanceof TableMissingError) return undefined;
      throw error;
    });
    try {
      const shape = opened ? await tableShape(opened.table) : undefined;
      const deletedRows =
        opened && consumer.upsertKey && (await hasColumn(opened.table, DELETED_COLUMN))
          ? await opened.table.countRows(`${DELETED_COLUMN} = true`)
          : undefined;
      const partitions: PartitionReport[] = [];
      const missingTopics: string[] = [];
      if (admin) {
        const endsOf = new Map<string, PartitionEnds[]>();
        for (const topic of topics) {
          const ends = await topicEnds(admin, topic);
          if (ends) endsOf.set(topic, ends);
          else missingTopics.push(topic);
        }
        // Asking for a missing topic's offsets fails the whole request: ask only for those that exist.
        const committed = await committedOffsets(admin, consumer.groupId, [...endsOf.keys()]);
        for (const [topic, ends] of endsOf) {
          for (const end of ends) {
            const c = committed.get(partitionKey(topic, end.partition));
            const committedOffset = c === undefined || c < 0 ? null : c;
            const lanceRows = opened
              ? await opened.table.countRows(partitionFilter(topic, end.partition))
              : 0;
            const max =
              opened && lanceRows > 0
                ? await maxOffset(opened.table, topic, end.partition, end.high)
                : undefined;
            partitions.push({
              topic,
              partition: end.partition,
              lanceRows,
              lanceMaxOffset: max ?? null,
              committed: committedOffset,
              logStart: end.low,
              logEnd: end.high,
              lag: end.high - (committedOffset ?? end.low),
            });
          }
        }
      }
      return {
        consumer: { name: consumer.name, source: consumer.source, groupId: consumer.groupId, topics },
        dataDir: consumer.dataDir,
        lance: {
          uri,
          table: consumer.table,
          path: datasetPathOf(uri, consumer.table),
          exists: opened !== undefined,
          ...shape,
        },
        declaredIndexes: consumer.indexes.map(indexName),
        mode: {
          mode: consumer.mode,
          ...(consumer.upsertKey ? { key: consumer.upsertKey } : {}),
          tombstones: consumer.tombstones,
          ...(deletedRows !== undefined && shape ? { liveRows: shape.rows - deletedRows, deletedRows } : {}),
        },
        kafka: {
          brokers: consumer.brokers,
          reachable: admin !== undefined,
          missingTopics,
          ...(kafkaError ? { error: kafkaError } : {}),
        },
        partitions,
        staging: await stagingFiles(stagingDir),
        publications: await publications(stagingDir),
        tables: await tableSummaries(consumer),
        deadLetters: await deadLetters(consumer, admin),
      };
    } finally {
      opened?.close();
    }
  } finally {
    await admin?.disconnect();
  }
}

async function hasColumn(table: lancedb.Table, name: string): Promise<boolean> {
  return (await table.schema()).fields.some((f) => f.name === name);
}

async function tryConnect(consumer: ResolvedConsumer): Promise<{ admin?: Admin; error?: string }> {
  // Short timeouts: inspect is interactive, and an unreachable broker should say so within seconds.
  const kafka = createKafka(
    {
      ...consumer,
      client: { ...consumer.client, connectionTimeout: consumer.client.connectionTimeout ?? 3_000 },
    },
    silentLogger(),
    'kafka-lance-inspect',
  );
  try {
    return { admin: await connectAdmin(kafka, consumer.brokers) };
  } catch (error) {
    if (error instanceof BrokerUnreachableError) return { error: error.message };
    throw error;
  }
}

async function topicsOf(admin: Admin, consumer: ResolvedConsumer): Promise<string[]> {
  return groupTopics(admin, consumer);
}

async function stagingFiles(dir: string): Promise<InspectReport['staging']> {
  const open = { count: 0, bytes: 0 };
  const sealed = { count: 0, bytes: 0 };
  for (const name of await readdirOrEmpty(dir)) {
    const part = parsePartName(name);
    if (!part) continue;
    const group = part.state === 'open' ? open : sealed;
    group.count++;
    group.bytes += await sizeOf(path.join(dir, name));
  }
  const quarantined = { count: 0, bytes: 0 };
  const qdir = path.join(dir, QUARANTINE_DIR);
  for (const name of await readdirOrEmpty(qdir)) {
    quarantined.count++;
    quarantined.bytes += await sizeOf(path.join(qdir, name));
  }
  return { dir, open, sealed, quarantined };
}

async function publications(stagingDir: string): Promise<InspectReport['publications']> {
  // A ledger entry may have lost its plan file (cleanup deletes the plan before `published`).
  const entries = (await ledger.list(stagingDir)).map((e) => ({
    id: e.id,
    state: e.published ? ('published' as const) : e.writing ? ('writing' as const) : ('planned' as const),
    rows: e.plan?.rows ?? e.writing?.rows ?? 0,
    parts: e.plan?.parts.length ?? 0,
  }));
  const count = (state: string) => entries.filter((e) => e.state === state).length;
  return {
    dir: path.join(stagingDir, 'plans'),
    planned: count('planned'),
    writing: count('writing'),
    published: count('published'),
    entries,
  };
}

async function deadLetters(
  consumer: ResolvedConsumer,
  admin: Admin | undefined,
): Promise<InspectReport['deadLetters']> {
  const target = consumer.deadLetter;
  if (target && 'topic' in target) {
    if (!admin) return { sink: 'topic', target: target.topic, count: null, note: 'broker unreachable' };
    const ends = await topicEnds(admin, target.topic);
    if (!ends) return { sink: 'topic', target: target.topic, count: 0, note: 'topic does not exist yet' };
    // Every dead letter is one record of the DLQ topic: its log-end offsets add up to the count.
    return {
      sink: 'topic',
      target: target.topic,
      count: ends.reduce((n, e) => n + e.high, 0),
      note: 'log-end sum of the topic: every dead letter written to it, by any run',
    };
  }
  const file = path.resolve(
    target?.file ?? path.join(consumer.dataDir, 'dead-letter', `${consumer.name}.jsonl`),
  );
  const lines = await countLines(file);
  return lines === undefined
    ? { sink: 'file', target: file, count: 0, note: 'no dead letters written yet' }
    : { sink: 'file', target: file, count: lines };
}

/** Lines of a file, read as a stream (a dead-letter file can be large); undefined when it does not exist. */
async function countLines(file: string): Promise<number | undefined> {
  try {
    let lines = 0;
    for await (const chunk of createReadStream(file)) {
      const buffer = chunk as Buffer;
      for (let i = buffer.indexOf(10); i !== -1; i = buffer.indexOf(10, i + 1)) lines++;
    }
    return lines;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

async function readdirOrEmpty(dir: string): Promise<string[]> {
  return fsp.readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
}

/** A part may be sealed or published (deleted) between listing and stat: count it as 0 bytes. */
async function sizeOf(file: string): Promise<number> {
  return fsp.stat(file).then(
    (s) => s.size,
    () => 0,
  );
}

// ---------------------------------------------------------------- human output

const n = (x: number) => x.toLocaleString('en-US');

export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(1)} ${units[u]}`;
}

function modeLine(m: InspectReport['mode']): string {
  if (m.mode === 'append') return `Mode append (tombstones: ${m.tombstones})`;
  const key = (m.key ?? []).map((c) => (c === '_key' ? '_key (the record key)' : c)).join(', ');
  const rows =
    m.liveRows === undefined
      ? ''
      : `; ${n(m.liveRows)} live rows, ${n(m.deletedRows ?? 0)} deleted keys kept as rows (read WHERE _deleted = false)`;
  return `Mode upsert on key (${key}), tombstones: ${m.tombstones}${rows}`;
}

export function formatInspect(r: InspectReport): string[] {
  const out: string[] = [];
  out.push(`Consumer ${r.consumer.name} (group ${r.consumer.groupId}) from ${r.consumer.source}`);
  out.push(`Data dir ${r.dataDir}`);
  out.push(modeLine(r.mode));
  out.push('');
  if (r.lance.exists) {
    out.push(`Lance table ${r.lance.table} at ${r.lance.path}`);
    out.push(
      `  version ${r.lance.version} (${r.lance.versions} versions kept, oldest ${r.lance.oldestVersionAt}), ` +
        `${r.lance.fragments} fragment${r.lance.fragments === 1 ? '' : 's'} (${r.lance.smallFragments} small), ${n(r.lance.rows ?? 0)} rows, ` +
        `${formatBytes(r.lance.bytes ?? 0)}, ${r.lance.indices} indices`,
    );
    for (const i of r.lance.indexes ?? []) out.push(indexLine(i));
    const built = new Set((r.lance.indexes ?? []).map((i) => i.name));
    for (const name of r.declaredIndexes.filter((d) => !built.has(d)))
      out.push(
        `  index ${name}: declared, not built yet (the table has too few rows to train it, or no round ran)`,
      );
  } else {
    out.push(
      `Lance table ${r.lance.table}: not created yet (nothing published); it will be at ${r.lance.path}`,
    );
  }
  out.push('');
  if (!r.kafka.reachable) {
    out.push(`Kafka: ${r.kafka.error ?? `unreachable at ${r.kafka.brokers.join(',')}`}`);
  } else {
    const rows = r.partitions.map((p) => [
      `${p.topic}[${p.partition}]`,
      n(p.lanceRows),
      p.lanceMaxOffset === null ? '-' : n(p.lanceMaxOffset),
      p.committed === null ? '-' : n(p.committed),
      n(p.logEnd),
      n(p.lag),
    ]);
    out.push(...table(['partition', 'Lance rows', 'Lance max _offset', 'committed', 'log end', 'lag'], rows));
    for (const t of r.kafka.missingTopics)
      out.push(
        `  topic ${t} does not exist on ${r.kafka.brokers.join(',')}: create it, or fix the definition`,
      );
  }
  out.push('');
  const s = r.staging;
  const g = (x: FileGroup) => `${x.count} (${formatBytes(x.bytes)})`;
  out.push(`Staging ${s.dir}`);
  out.push(`  open .part ${g(s.open)}, sealed .arrows ${g(s.sealed)}, quarantined ${g(s.quarantined)}`);
  const p = r.publications;
  out.push(`Publications ${p.dir}`);
  out.push(
    `  planned ${p.planned}, writing ${p.writing}, published (sources not yet removed) ${p.published}`,
  );
  for (const e of p.entries.slice(0, 10))
    out.push(`    ${e.id} ${e.state}: ${n(e.rows)} rows in ${e.parts} parts`);
  if (p.entries.length > 10) out.push(`    … and ${p.entries.length - 10} more`);
  if (r.tables.length > 1 || r.tables.some((t) => t.table !== r.lance.table)) {
    out.push(`Tables (${r.tables.length})`);
    const rows = r.tables.map((t) => [
      t.table,
      t.rows === undefined ? '-' : n(t.rows),
      `${n(t.waitingParts)} (${formatBytes(t.waitingBytes)})`,
      n(t.plannedRows),
      t.quarantinedFiles === 0 ? '-' : n(t.quarantinedFiles),
      t.lastCommitAt ?? 'never',
    ]);
    out.push(
      ...table(['table', 'Lance rows', 'parts waiting', 'planned rows', 'quarantined', 'last commit'], rows),
    );
  }
  const d = r.deadLetters;
  out.push(
    `Dead letters (${d.sink} ${d.target}): ${d.count === null ? 'unknown' : n(d.count)}${d.note ? ` (${d.note})` : ''}`,
  );
  return out;
}

/** One index and its coverage: `index emb_idx on emb (IvfPq, cosine): 9,000 indexed, 120 unindexed`. */
export function indexLine(i: IndexShape): string {
  const kind = i.distanceType ? `${i.type}, ${i.distanceType}` : i.type;
  return `  index ${i.name} on ${i.columns.join(', ')} (${kind}): ${n(i.indexedRows)} indexed, ${n(i.unindexedRows)} unindexed`;
}

function table(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    `  ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')}`;
  return [line(header), ...rows.map(line)];
}
