import * as lancedb from '@lancedb/lancedb';
import type { Campaign } from './campaign';
import { TABLE } from './campaign';
import { sha256 } from './producer';
import { sleep } from './random';

export interface NodeReading {
  readonly rows: number;
  readonly duplicates: number;
  readonly duplicateExamples: string[];
  readonly mismatches: number;
  readonly mismatchExamples: string[];
  /** Offsets per partition found in the table. */
  readonly offsets: Map<number, Set<number>>;
  readonly foreign: number;
}

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
export async function readWithLanceDb(c: Campaign): Promise<NodeReading> {
  return retrying(async () => {
    const db = await connect(c);
    const offsets = new Map<number, Set<number>>();
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
        for await (const batch of t.query().select(['_topic', '_partition', '_offset', 'payload', 'sha'])) {
          const topic = batch.getChild('_topic')!;
          const partition = batch.getChild('_partition')!;
          const offset = batch.getChild('_offset')!;
          const payload = batch.getChild('payload')!;
          const sha = batch.getChild('sha')!;
          for (let i = 0; i < batch.numRows; i++) {
            rows += 1;
            if (topic.get(i) !== c.topic) {
              foreign += 1;
              continue;
            }
            const p = Number(partition.get(i));
            const o = Number(offset.get(i));
            let set = offsets.get(p);
            if (!set) offsets.set(p, (set = new Set()));
            if (set.has(o)) {
              duplicates += 1;
              if (duplicateExamples.length < 10) duplicateExamples.push(`p${p}@${o}`);
            } else set.add(o);
            const text = payload.get(i) as string | null;
            if (text === null || sha256(text) !== sha.get(i)) {
              mismatches += 1;
              if (mismatchExamples.length < 10) mismatchExamples.push(`p${p}@${o}`);
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

/** "<id>/<partition>" → offsets, as verify_table.py --by-topic-id reads them. */
export const groupKey = (id: string, partition: number): string => `${id}/${partition}`;

interface IncarnationReading {
  readonly rows: number;
  readonly duplicates: number;
  readonly duplicateExamples: string[];
  readonly mismatches: number;
  readonly mismatchExamples: string[];
  readonly offsets: Map<string, Set<number>>;
  readonly foreign: number;
}

export async function readIncarnations(c: Campaign): Promise<IncarnationReading> {
  return retrying(async () => {
    const db = await connect(c);
    const offsets = new Map<string, Set<number>>();
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
        const columns = ['_topic', '_topic_id', '_partition', '_offset', 'payload', 'sha'];
        for await (const batch of t.query().select(columns)) {
          const topic = batch.getChild('_topic')!;
          const id = batch.getChild('_topic_id')!;
          const partition = batch.getChild('_partition')!;
          const offset = batch.getChild('_offset')!;
          const payload = batch.getChild('payload')!;
          const sha = batch.getChild('sha')!;
          for (let i = 0; i < batch.numRows; i++) {
            rows += 1;
            if (topic.get(i) !== c.topic) {
              foreign += 1;
              continue;
            }
            const key = groupKey(String(id.get(i)), Number(partition.get(i)));
            const o = Number(offset.get(i));
            let set = offsets.get(key);
            if (!set) offsets.set(key, (set = new Set()));
            if (set.has(o)) {
              duplicates += 1;
              if (duplicateExamples.length < 10) duplicateExamples.push(`${key}@${o}`);
            } else set.add(o);
            const text = payload.get(i) as string | null;
            if (text === null || sha256(text) !== sha.get(i)) {
              mismatches += 1;
              if (mismatchExamples.length < 10) mismatchExamples.push(`${key}@${o}`);
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
