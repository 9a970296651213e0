import { existsSync } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { openTableIfCommitted } from '../lance/open-if-committed';
import type { ResolvedConsumer } from '../config';
import { OFFSET_COLUMN, PARTITION_COLUMN, TOPIC_COLUMN } from '../staging/system-columns';
import { TableMissingError } from './errors';

/** Where a consumer's table lives, as the replica computes it (src/replica/replica.ts). */
export function lanceUriOf(consumer: ResolvedConsumer): string {
  return consumer.lance.uri ?? path.join(consumer.dataDir, 'lance');
}

/** The Lance dataset itself (what `lance.dataset(...)` in Python opens): LanceDB keeps table T at <uri>/T.lance. */
export function datasetPathOf(uri: string, table: string): string {
  if (!uri.includes('://')) return path.join(uri, `${table}.lance`);
  // s3+ddb://bucket/prefix?ddbTableName=T: the query configures Lance and follows the
  // dataset's path, as LanceDB builds it (bucket/prefix/table.lance?ddbTableName=T).
  const query = uri.indexOf('?');
  const base = query < 0 ? uri : uri.slice(0, query);
  return `${base.replace(/\/+$/, '')}/${table}.lance${query < 0 ? '' : uri.slice(query)}`;
}

export interface OpenedTable {
  readonly db: lancedb.Connection;
  readonly table: lancedb.Table;
  readonly uri: string;
  close(): void;
}

/** Opens an existing table; a missing one is a TableMissingError that says where it would be. */
export async function openExistingTable(consumer: ResolvedConsumer): Promise<OpenedTable> {
  const uri = lanceUriOf(consumer);
  // connect() creates a missing local directory: look first, so that reading never writes.
  if (!uri.includes('://') && !existsSync(datasetPathOf(uri, consumer.table))) {
    throw new TableMissingError(consumer.table, datasetPathOf(uri, consumer.table));
  }
  const db = await lancedb.connect(uri, {
    // Replicas may be appending right now: always read the latest version.
    readConsistencyInterval: 0,
    ...(consumer.lance.storageOptions ? { storageOptions: { ...consumer.lance.storageOptions } } : {}),
  });
  const table = await openTableIfCommitted(db, consumer.table);
  if (!table) {
    db.close();
    throw new TableMissingError(consumer.table, datasetPathOf(uri, consumer.table));
  }
  return {
    db,
    table,
    uri,
    close: () => {
      table.close();
      db.close();
    },
  };
}

export interface TableShape {
  readonly version: number;
  /** Versions still on disk (compaction's cleanup removes old ones). */
  readonly versions: number;
  readonly oldestVersionAt: string | undefined;
  readonly fragments: number;
  readonly smallFragments: number;
  readonly rows: number;
  readonly bytes: number;
  readonly indices: number;
  /** Every index of the table, kafka-lance's own on system columns included. */
  readonly indexes: readonly IndexShape[];
}

export interface IndexShape {
  readonly name: string;
  readonly type: string;
  readonly columns: readonly string[];
  /** Vector indexes only. */
  readonly distanceType: string | undefined;
  readonly indexedRows: number;
  readonly unindexedRows: number;
}

/** The table's indexes with their coverage (LanceDB indexStats). */
export async function indexShapes(table: lancedb.Table): Promise<IndexShape[]> {
  const shapes: IndexShape[] = [];
  for (const index of await table.listIndices()) {
    const stats = await table.indexStats(index.name);
    shapes.push({
      name: index.name,
      type: index.indexType,
      columns: index.columns,
      distanceType: stats?.distanceType,
      indexedRows: stats?.numIndexedRows ?? 0,
      unindexedRows: stats?.numUnindexedRows ?? 0,
    });
  }
  return shapes;
}

export async function tableShape(table: lancedb.Table): Promise<TableShape> {
  const [version, versions, stats, indexes] = await Promise.all([
    table.version(),
    table.listVersions(),
    table.stats(),
    indexShapes(table),
  ]);
  const oldest = versions.reduce<Date | undefined>(
    (min, v) => (min === undefined || v.timestamp < min ? v.timestamp : min),
    undefined,
  );
  return {
    version,
    versions: versions.length,
    oldestVersionAt: oldest?.toISOString(),
    fragments: stats.fragmentStats.numFragments,
    smallFragments: stats.fragmentStats.numSmallFragments,
    rows: stats.numRows,
    bytes: stats.totalBytes,
    indices: stats.numIndices,
    indexes,
  };
}

export const quote = (s: string): string => `'${s.replace(/'/g, "''")}'`;

export function partitionFilter(topic: string, partition: number): string {
  return `${TOPIC_COLUMN} = ${quote(topic)} AND ${PARTITION_COLUMN} = ${partition}`;
}

/**
 * The highest `_offset` of a partition in the table, or undefined when it has none.
 * LanceDB 0.39's query API has no aggregate or ORDER BY, and a scan reads every row;
 * counting rows at or above a bound is answered from the BTree index on `_offset`
 * (about a millisecond), so a binary search over [0, upper) costs ~log2(upper) counts.
 */
export async function maxOffset(
  table: lancedb.Table,
  topic: string,
  partition: number,
  upper: number = Number.MAX_SAFE_INTEGER,
): Promise<number | undefined> {
  const where = partitionFilter(topic, partition);
  const atLeast = async (x: number) => (await table.countRows(`${where} AND ${OFFSET_COLUMN} >= ${x}`)) > 0;
  if (!(await atLeast(0))) return undefined;
  // Rows at or above `upper` mean the table holds offsets the log never had (another broker's data).
  let hi = (await atLeast(upper)) ? Number.MAX_SAFE_INTEGER : upper;
  let lo = 0; // invariant: atLeast(lo) is true, atLeast(hi) is false
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2);
    if (await atLeast(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}
