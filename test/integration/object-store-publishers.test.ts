import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { recordOffset } from '../../src/common/offsets';
import type { Materializer } from '../../src/materializer/materializer';
import { minuteKeyOf } from '../../src/staging';
import {
  TABLE,
  TOPIC,
  openFixtureStaging,
  openMaterializer,
  ownershipOf,
} from '../support/materializer-fixture';
import { payloadOf, range, rowsFor, tempDir } from '../support/rows';
import { s3DatabaseUri, s3LocalSuite } from '../support/s3-local';

/**
 * The hazard: two replicas that commit the same Lance version at once. On a store with
 * conditional writes (s3proxy 4.0.0 answers 412 to the second If-None-Match PUT) Lance
 * turns the loser's commit into a conflict, rebases it and commits again, so no add is
 * lost and no count has to wait. Four publishers, each with its own staging directory
 * and partition, publish into one s3:// table at once (and, in the second test, a
 * compactor commits beside them); a reader that opens the table fresh at the end must
 * find every row exactly once.
 */
const s3 = s3LocalSuite();

const PUBLISHERS = 4;
const PER_PARTITION = 6_000;
const ROWS_PER_PART = 600;

async function stagePartition(tableDir: string, partition: number): Promise<void> {
  const staging = await openFixtureStaging(tableDir, { owner: 'A', epoch: 1 });
  for (let start = 0; start < PER_PARTITION; start += ROWS_PER_PART) {
    const end = Math.min(PER_PARTITION, start + ROWS_PER_PART);
    staging.push({
      topic: TOPIC,
      partition,
      batch: rowsFor(TOPIC, partition, range(start, end)),
      minute: minuteKeyOf(Date.UTC(2026, 10, 30, 12)),
      handledThrough: recordOffset(end - 1),
    });
    await staging.flush({ force: true });
  }
  await staging.close();
}

/** (partition, offset) → copies, read by a connection opened now. */
async function freshRows(uri: string): Promise<{ copies: Map<string, number>; bad: number }> {
  const db = await lancedb.connect(uri, { storageOptions: s3.storageOptions });
  const table = await db.openTable(TABLE);
  const rows = (await table.query().select(['_partition', '_offset', 'message']).toArray()) as {
    _partition: number;
    _offset: bigint;
    message: string;
  }[];
  table.close();
  db.close();
  const copies = new Map<string, number>();
  let bad = 0;
  for (const r of rows) {
    const key = `${r._partition}:${Number(r._offset)}`;
    copies.set(key, (copies.get(key) ?? 0) + 1);
    if (r.message !== payloadOf(TOPIC, r._partition, Number(r._offset))) bad++;
  }
  return { copies, bad };
}

async function fourPublishers(compactEveryMs: number | undefined): Promise<void> {
  const dir = await tempDir('kl-s3-publishers');
  const uri = s3DatabaseUri('publishers');
  const materializers: Materializer[] = [];
  try {
    for (let p = 0; p < PUBLISHERS; p++) {
      const tableDir = path.join(dir, `replica-${p}`, 'staging', TABLE);
      await stagePartition(tableDir, p);
      const m = await openMaterializer(tableDir, uri, {
        lance: { uri, table: TABLE, storageOptions: s3.storageOptions },
        owner: `publisher-${p}`,
        // Small publications: many commits, so the four collide often.
        maxPublicationBytes: 64 * 1024,
      });
      m.setOwnership(ownershipOf(PUBLISHERS, [{ owner: 'A', epoch: 1, start: 0 }], PER_PARTITION));
      materializers.push(m);
    }
    // Each publisher runs until its ledger and staging are empty; a failed publication
    // (retried by runOnce after its backoff) makes another round.
    const started = performance.now();
    // The compactor (optimize: compaction, index update) commits too, concurrently with
    // the publishers; Lance reconciles a compaction with appends (neither conflicts).
    let publishing = true;
    let compactions = 0;
    let compactionFailures = 0;
    const compactor = (async () => {
      while (compactEveryMs !== undefined && publishing) {
        await new Promise((r) => setTimeout(r, compactEveryMs));
        await materializers[0]!.lance.optimize().then(
          (ran) => void (compactions += ran ? 1 : 0),
          () => void (compactionFailures += 1),
        );
      }
    })();
    const publications = await Promise.all(
      materializers.map(async (m, p) => {
        let made = 0;
        const tableDir = path.join(dir, `replica-${p}`, 'staging', TABLE);
        for (let round = 0; round < 200; round++) {
          made += (await m.runOnce()).length;
          const left = (await fsp.readdir(tableDir)).filter((n) => n.endsWith('.arrows'));
          if (left.length === 0) break;
          await new Promise((r) => setTimeout(r, 200));
        }
        return made;
      }),
    );
    publishing = false;
    await compactor;
    const failed = materializers.reduce((n, m) => n + m.stats().failedPublications, 0);
    const { copies, bad } = await freshRows(uri);
    const missing: string[] = [];
    const twice: string[] = [];
    for (let p = 0; p < PUBLISHERS; p++) {
      for (let o = 0; o < PER_PARTITION; o++) {
        const n = copies.get(`${p}:${o}`) ?? 0;
        if (n === 0) missing.push(`${p}:${o}`);
        if (n > 1) twice.push(`${p}:${o}`);
      }
    }
    // The before/after measurement reads this line.
    console.log(
      JSON.stringify({
        publications,
        compactions,
        compactionFailures,
        failedPublications: failed,
        rows: [...copies.values()].reduce((a, b) => a + b, 0),
        expected: PUBLISHERS * PER_PARTITION,
        missing: missing.length,
        duplicated: twice.length,
        seconds: Math.round((performance.now() - started) / 100) / 10,
      }),
    );
    expect({ missing: missing.length, duplicated: twice.length, bad }).toEqual({
      missing: 0,
      duplicated: 0,
      bad: 0,
    });
    expect(copies.size).toBe(PUBLISHERS * PER_PARTITION);
    // The compactor did commit while the publishers did (else the second test shows nothing).
    if (compactEveryMs !== undefined) expect(compactions).toBeGreaterThan(0);
  } finally {
    for (const m of materializers) m.close();
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

test('four concurrent publishers into one s3:// table on a store with conditional writes: every publication\u2019s rows present exactly once', () =>
  fourPublishers(undefined));

test('four publishers and a compactor every 500 ms committing into one s3:// table at once: every row present exactly once', () =>
  fourPublishers(500));
