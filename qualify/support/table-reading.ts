import * as lancedb from '@lancedb/lancedb';
import type { Campaign } from './campaign';
import { TABLE } from './campaign';
import { sha256 } from './producer';
import { sleep } from './random';

/** What a read of every row found: its keys grouped (by partition, or incarnation and partition), duplicates and damaged payloads. */
interface Reading<K> {
  readonly rows: number;
  readonly duplicates: number;
  readonly duplicateExamples: string[];
  readonly mismatches: number;
  readonly mismatchExamples: string[];
  /** Offsets per group found in the table. */
  readonly offsets: Map<K, Set<number>>;
  readonly foreign: number;
}

export type NodeReading = Reading<number>;
type IncarnationReading = Reading<string>;

async function retrying<T>(read: () => Promise<T>, attempts = 20): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      // s3proxy answers a LIST racing a commit with an empty listing now and then.
      if (attempt >= attempts) throw error;
      await sleep(1_000);
    }
  }
}

async function connect(c: Campaign): Promise<lancedb.Connection> {
  return lancedb.connect(c.lanceUri, {
    readConsistencyInterval: 0,
    ...(Object.keys(c.storageOptions).length > 0 ? { storageOptions: { ...c.storageOptions } } : {}),
  });
}

export async function countRows(c: Campaign): Promise<number> {
  return retrying(async () => {
    const db = await connect(c);
    try {
      if (!(await db.tableNames()).includes(TABLE)) return 0;
      const t = await db.openTable(TABLE);
      try {
        return await t.countRows();
      } finally {
        t.close();
      }
    } finally {
      db.close();
    }
  }, 5);
}

/** Every row through LanceDB for Node, streamed: keys, duplicates, and the payload checksum recomputed. */
export function readWithLanceDb(c: Campaign): Promise<NodeReading> {
  return readRows(
    c,
    [],
    (row) => Number(row('_partition')),
    (p) => `p${p}`,
  );
}

/** "<id>/<partition>" → offsets, as verify_table.py --by-topic-id reads them. */
export const groupKey = (id: string, partition: number): string => `${id}/${partition}`;

/** The same read, grouped by topic incarnation and partition. */
export function readIncarnations(c: Campaign): Promise<IncarnationReading> {
  return readRows(
    c,
    ['_topic_id'],
    (row) => groupKey(String(row('_topic_id')), Number(row('_partition'))),
    (key) => key,
  );
}

async function readRows<K>(
  c: Campaign,
  extraColumns: readonly string[],
  groupOf: (row: (column: string) => unknown) => K,
  label: (group: K) => string,
): Promise<Reading<K>> {
  return retrying(async () => {
    const db = await connect(c);
    const offsets = new Map<K, Set<number>>();
    let rows = 0;
    let duplicates = 0;
    let mismatches = 0;
    let foreign = 0;
    const duplicateExamples: string[] = [];
    const mismatchExamples: string[] = [];
    try {
      if (!(await db.tableNames()).includes(TABLE))
        return { rows, duplicates, duplicateExamples, mismatches, mismatchExamples, offsets, foreign };
      const t = await db.openTable(TABLE);
      try {
        const columns = ['_topic', ...extraColumns, '_partition', '_offset', 'payload', 'sha'];
        for await (const batch of t.query().select(columns)) {
          const topic = batch.getChild('_topic')!;
          const offset = batch.getChild('_offset')!;
          const payload = batch.getChild('payload')!;
          const sha = batch.getChild('sha')!;
          for (let i = 0; i < batch.numRows; i++) {
            rows += 1;
            if (topic.get(i) !== c.topic) {
              foreign += 1;
              continue;
            }
            const group = groupOf((column) => batch.getChild(column)!.get(i));
            const o = Number(offset.get(i));
            let set = offsets.get(group);
            if (!set) offsets.set(group, (set = new Set()));
            if (set.has(o)) {
              duplicates += 1;
              if (duplicateExamples.length < 10) duplicateExamples.push(`${label(group)}@${o}`);
            } else set.add(o);
            const text = payload.get(i) as string | null;
            if (text === null || sha256(text) !== sha.get(i)) {
              mismatches += 1;
              if (mismatchExamples.length < 10) mismatchExamples.push(`${label(group)}@${o}`);
            }
          }
        }
      } finally {
        t.close();
      }
    } finally {
      db.close();
    }
    return { rows, duplicates, duplicateExamples, mismatches, mismatchExamples, offsets, foreign };
  }, 5);
}
