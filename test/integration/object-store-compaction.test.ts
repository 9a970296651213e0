import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { silentLogger } from '../../src/common/logger';
import { recordOffset } from '../../src/common/offsets';
import { LanceTable, type LanceTarget } from '../../src/lance/lance-table';
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
 * Scheduled compaction with version cleanup on a store with atomic commits (s3proxy
 * 4.0.0), while a publisher appends: the compactor is a Materializer that owns the first
 * partition (optimizeIfLeader) with a short `cleanupOlderThanMs`. Lance reconciles the
 * compactions with the appends; every row stays, exactly once, readable by a fresh
 * reader (a file removed while a manifest still used it would fail the scan), and
 * compaction + cleanup reduce fragments and versions.
 */
const s3 = s3LocalSuite();

const RETENTION_MS = 2_000;
const SEEDED = 30; // appends of 100 rows to partition 1 before the run
const PUBLISHED = 20; // parts of 200 rows of partition 0, one publication each

async function shape(target: LanceTarget): Promise<{ rows: number; fragments: number; versions: number }> {
  const db = await lancedb.connect(target.uri, { storageOptions: { ...target.storageOptions } });
  const table = await db.openTable(TABLE);
  try {
    return {
      rows: await table.countRows(),
      fragments: (await table.stats()).fragmentStats.numFragments,
      versions: (await table.listVersions()).length,
    };
  } finally {
    table.close();
    db.close();
  }
}

/** (partition, offset) → copies and rows whose payload is wrong, read on a new connection (a full scan). */
async function freshRows(target: LanceTarget): Promise<{ copies: Map<string, number>; bad: number }> {
  const db = await lancedb.connect(target.uri, { storageOptions: { ...target.storageOptions } });
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

test('on an s3:// table with atomic commits scheduled compaction + cleanup run while a publisher appends: every row once, fewer fragments and versions', async () => {
  const dir = await tempDir('kl-s3-compaction');
  const uri = s3DatabaseUri('compaction');
  const target: LanceTarget = { uri, table: TABLE, storageOptions: s3.storageOptions };
  const seed = await LanceTable.connect(target, silentLogger());
  const publisherDir = path.join(dir, 'publisher', 'staging', TABLE);
  const compactorDir = path.join(dir, 'compactor', 'staging', TABLE);
  const publisher = await openMaterializer(publisherDir, uri, {
    lance: target,
    owner: 'publisher',
    maxPublicationBytes: 16 * 1024,
  });
  const compactor = await openMaterializer(compactorDir, uri, {
    lance: target,
    owner: 'A',
    cleanupOlderThanMs: RETENTION_MS,
  });
  try {
    // Many small versions and fragments first (partition 1).
    for (let i = 0; i < SEEDED; i++) {
      const from = i * 100;
      await seed.append({
        batches: (async function* () {
          yield await Promise.resolve(rowsFor(TOPIC, 1, range(from, from + 100)));
        })(),
      });
    }
    const seeded = await shape(target);
    expect(seeded).toMatchObject({ rows: SEEDED * 100 });
    expect(seeded.fragments).toBeGreaterThanOrEqual(SEEDED);

    // Partition 0 staged as PUBLISHED parts, published while the compactor runs.
    const staging = await openFixtureStaging(publisherDir, { owner: 'A', epoch: 1 });
    for (let i = 0; i < PUBLISHED; i++) {
      staging.push({
        topic: TOPIC,
        partition: 0,
        batch: rowsFor(TOPIC, 0, range(i * 200, (i + 1) * 200)),
        minute: minuteKeyOf(Date.UTC(2026, 10, 30, 12)),
        handledThrough: recordOffset((i + 1) * 200 - 1),
      });
      await staging.flush({ force: true });
    }
    await staging.close();
    publisher.setOwnership(ownershipOf(1, [{ owner: 'A', epoch: 1, start: 0 }], PUBLISHED * 200));
    // The compactor leads: it owns the first partition of the first topic.
    compactor.setOwnership(ownershipOf(1, [{ owner: 'A', epoch: 1, start: 0 }], PUBLISHED * 200));

    let publishing = true;
    let compactions = 0;
    const compacting = (async () => {
      // Compact + clean up every 400 ms while the publications run (the seeded versions
      // pass the retention 2 s in).
      while (publishing) {
        if (await compactor.optimizeIfLeader()) compactions++;
        await new Promise((r) => setTimeout(r, 400));
      }
    })();
    for (let round = 0; round < 100; round++) {
      await publisher.runOnce();
      const left = (await fsp.readdir(publisherDir)).filter((n) => n.endsWith('.arrows'));
      if (left.length === 0) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    publishing = false;
    await compacting;

    // A last compaction once everything is older than the retention: count before = after.
    const before = await shape(target);
    await new Promise((r) => setTimeout(r, RETENTION_MS + 200));
    // What `kafka-lance compact` does: optimize + cleanup with the retention.
    expect(await compactor.lance.optimize(RETENTION_MS)).toBeDefined();
    const after = await shape(target);
    const { copies, bad } = await freshRows(target);

    const expected = SEEDED * 100 + PUBLISHED * 200;
    const missing: string[] = [];
    const twice: string[] = [];
    for (const [p, n] of [
      [0, PUBLISHED * 200],
      [1, SEEDED * 100],
    ] as const) {
      for (let o = 0; o < n; o++) {
        const c = copies.get(`${p}:${o}`) ?? 0;
        if (c === 0) missing.push(`${p}:${o}`);
        if (c > 1) twice.push(`${p}:${o}`);
      }
    }
    console.log(
      JSON.stringify({
        compactionsDuringPublishing: compactions,
        failedPublications: publisher.stats().failedPublications,
        seeded,
        before,
        after,
      }),
    );
    expect({ missing: missing.length, duplicated: twice.length, bad }).toEqual({
      missing: 0,
      duplicated: 0,
      bad: 0,
    });
    expect(compactions).toBeGreaterThan(0);
    expect(copies.size).toBe(expected);
    expect(before.rows).toBe(expected);
    expect(after.rows).toBe(expected);
    expect(after.fragments).toBeLessThan(seeded.fragments);
    expect(after.fragments).toBeLessThanOrEqual(2);
    expect(after.versions).toBeLessThan(before.versions);
    expect(after.versions).toBeLessThan(seeded.versions);
  } finally {
    seed.close();
    publisher.close();
    compactor.close();
    await fsp.rm(dir, { recursive: true, force: true });
  }
}, 60_000);
