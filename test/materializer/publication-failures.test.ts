import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import {
  TOPIC,
  TABLE,
  capturingLogger,
  expectExactly,
  ledgerFiles,
  openMaterializer,
  ownershipOf,
  readLance,
  sealedPartCount,
  stageRows,
  stageWithColumn,
} from '../support/materializer-fixture';
import type { CrashPointName } from '../../src/faults/crash-points';
import { range, tempDir } from '../support/rows';

const CHILD = path.resolve(__dirname, '../../dist/test/support/materializer-child.js');

const chainA = [{ owner: 'A', epoch: 1, start: 0 }];

let dir: string;
let tableDir: string;
let lanceDir: string;
let deadLetterFile: string;
beforeEach(async () => {
  dir = await tempDir('kl-matfail');
  tableDir = path.join(dir, 'staging', TABLE);
  lanceDir = path.join(dir, 'lance');
  deadLetterFile = path.join(dir, 'dead-letter', 'events.publications.jsonl');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

async function quarantine(): Promise<string[]> {
  return (await fsp.readdir(path.join(tableDir, 'quarantine')).catch(() => [] as string[])).sort();
}

async function deadLetters(): Promise<{ offset: number; reason: string; detail: string; value: string }[]> {
  const text = await fsp.readFile(deadLetterFile, 'utf8');
  return text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { offset: number; reason: string; detail: string; value: string });
}

const offsetsInLance = async () => (await readLance(lanceDir)).map((r) => r.offset).sort((a, b) => a - b);

test('one bad publication never blocks the table: Float64 in the table, Utf8 in later parts → retried, then quarantined with a reason and dead letters, while later publications go on', async () => {
  const { logger, lines } = capturingLogger();
  await stageWithColumn(tableDir, { partition: 0, from: 0, to: 100, column: 'score', type: 'float64' });
  const m = await openMaterializer(tableDir, lanceDir, { logger, deadLetterFile, maxPermanentFailures: 2 });
  m.setOwnership(ownershipOf(1, chainA, 300));
  expect((await m.runOnce()).map((r) => r.rows)).toEqual([100]);

  // Another staging worker inferred Utf8 for the same column.
  await stageWithColumn(tableDir, { partition: 0, from: 100, to: 200, column: 'score', type: 'utf8' });
  const now = Date.now();
  expect(await m.runOnce(now)).toEqual([]);
  // Parts keep coming: they are published while the failed plan waits for its retry.
  await stageRows(tableDir, { partitions: 1, perPartition: 100, rowsPerPart: 100, from: 200 });
  expect((await m.runOnce(Date.now())).map((r) => r.rows)).toEqual([100]);
  // The retry fails the same way: the bound is reached, its parts are moved out of the way.
  expect(await m.runOnce(now + 60_000)).toEqual([]);

  expect(await offsetsInLance()).toEqual([...range(0, 100), ...range(200, 300)]);
  expect(await ledgerFiles(tableDir)).toEqual([]);
  expect(await sealedPartCount(tableDir)).toBe(0);
  const quarantined = await quarantine();
  expect(quarantined.filter((n) => n.endsWith('.arrows'))).toHaveLength(1);
  const reasonFile = quarantined.find((n) => n.endsWith('.reason.json'))!;
  const reason = JSON.parse(
    await fsp.readFile(path.join(tableDir, 'quarantine', reasonFile), 'utf8'),
  ) as Record<string, unknown>;
  expect(reason).toMatchObject({
    reason: 'schema-incompatible',
    context: { column: 'score', tableType: 'Float64', stagedType: 'Utf8' },
    keptRows: 100,
  });
  const letters = await deadLetters();
  expect(letters.map((l) => l.offset)).toEqual(range(100, 200));
  expect(letters.every((l) => l.reason === 'schema-mismatch' && /score/.test(l.detail))).toBe(true);
  expect(JSON.parse(Buffer.from(letters[0]!.value, 'base64').toString('utf8'))).toMatchObject({
    score: 'v100',
  });

  const stats = m.stats();
  expect(stats.failures).toMatchObject({ 'schema-incompatible': 2 });
  expect(stats.quarantinedParts).toMatchObject({ 'schema-incompatible': 1 });
  expect(stats.deadLetteredRows).toEqual({ [TOPIC]: 100 });
  // The error names the column and both types.
  const failure = lines.find((l) => l.event === 'publication.quarantined');
  expect(failure).toMatchObject({ level: 50, column: 'score', tableType: 'Float64', stagedType: 'Utf8' });
  m.close();
});

test('an inferred key Lance refuses ("a.b") is quarantined; the table is still created and fed by the other publications', async () => {
  await stageWithColumn(tableDir, { partition: 0, from: 0, to: 100, column: 'a.b', type: 'utf8' });
  await stageRows(tableDir, { partitions: 1, perPartition: 100, rowsPerPart: 100, from: 100 });
  const { logger, lines } = capturingLogger();
  const m = await openMaterializer(tableDir, lanceDir, { logger, deadLetterFile, maxPermanentFailures: 1 });
  m.setOwnership(ownershipOf(1, chainA, 200));
  expect((await m.runOnce()).map((r) => r.rows)).toEqual([100]);
  expect(lines.find((l) => l.event === 'publication.quarantined')).toMatchObject({
    reason: 'invalid-column-name',
    column: 'a.b',
  });
  expect(await offsetsInLance()).toEqual(range(100, 200));
  expect(await sealedPartCount(tableDir)).toBe(0);
  expect(await ledgerFiles(tableDir)).toEqual([]);
  expect((await quarantine()).filter((n) => n.endsWith('.arrows'))).toHaveLength(1);
  expect((await deadLetters()).map((l) => l.offset)).toEqual(range(0, 100));
  expect(m.stats().quarantinedParts).toMatchObject({ 'invalid-column-name': 1 });
  m.close();
});

test('a transient failure is retried with backoff, never holds the other publications back, and is never quarantined', async () => {
  await stageRows(tableDir, { partitions: 1, perPartition: 100, rowsPerPart: 100 });
  await stageRows(tableDir, { partitions: 1, perPartition: 100, rowsPerPart: 100, from: 100 });
  let failing = true;
  let attempts = 0;
  const m = await openMaterializer(tableDir, lanceDir, {
    maxPublicationBytes: 1, // one part per publication
    maxPermanentFailures: 1,
    deadLetterFile,
    hooks: {
      fetched: (part) => {
        if (part.ranges[0]!.firstOffset !== 0) return;
        attempts += 1;
        if (failing) throw new Error('disk hiccup');
      },
    },
  });
  m.setOwnership(ownershipOf(1, chainA, 200));
  const now = Date.now();
  expect((await m.runOnce(now)).map((r) => r.rows)).toEqual([100]);
  expect(await m.runOnce(now)).toEqual([]); // backing off: not tried again yet
  expect(attempts).toBe(1);
  expect(await m.runOnce(now + 60_000)).toEqual([]);
  expect(attempts).toBe(2);
  failing = false;
  expect((await m.runOnce(now + 120_000)).map((r) => r.rows)).toEqual([100]);
  expectExactly(await readLance(lanceDir), 1, () => 200);
  expect(await quarantine()).toEqual([]);
  expect(m.stats().failures).toMatchObject({ storage: 2 });
  expect(m.stats().failedPublications).toBe(2);
  m.close();
});

describe('a set-aside cut short by a SIGKILL is finished by the restart: nothing published, nothing lost', () => {
  const points: CrashPointName[] = [
    'after-quarantine-marked',
    'after-dead-letters-written',
    'after-first-part-quarantined',
  ];
  test.each(points)('%s', async (point) => {
    await stageWithColumn(tableDir, { partition: 0, from: 0, to: 100, column: 'score', type: 'float64' });
    const first = await openMaterializer(tableDir, lanceDir);
    first.setOwnership(ownershipOf(1, chainA, 300));
    await first.runOnce();
    first.close();
    // One plan of two parts whose column the table has as Float64.
    await stageWithColumn(tableDir, { partition: 0, from: 100, to: 200, column: 'score', type: 'utf8' });
    await stageWithColumn(tableDir, { partition: 0, from: 200, to: 300, column: 'score', type: 'utf8' });
    const run = (env: NodeJS.ProcessEnv) =>
      new Promise<{ code: number | null; signal: string | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [CHILD, tableDir, lanceDir, '1', '300', 'buffered', '1'], {
          env: { ...process.env, ...env },
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let stderr = '';
        child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
        child.on('exit', (code, signal) => resolve({ code, signal, stderr }));
      });
    expect((await run({ KAFKA_LANCE_TEST_CRASH_AT: point })).signal).toBe('SIGKILL');
    expect(await run({ KAFKA_LANCE_TEST_CRASH_AT: '' })).toMatchObject({ code: 0, stderr: '' });
    expect(await offsetsInLance()).toEqual(range(0, 100));
    expect(await sealedPartCount(tableDir)).toBe(0);
    expect(await ledgerFiles(tableDir)).toEqual([]);
    const names = (await fsp.readdir(path.join(tableDir, 'quarantine'))).sort();
    expect(names.filter((n) => n.endsWith('.arrows'))).toHaveLength(2);
    expect(names.filter((n) => n.endsWith('.arrows.reason.json'))).toHaveLength(2);
    // Every row is in the dead-letter file at least once (twice only if the kill came before any move).
    deadLetterFile = path.join(tableDir, 'quarantine', 'dead-letters.jsonl');
    expect([...new Set((await deadLetters()).map((l) => l.offset))].sort((a, b) => a - b)).toEqual(
      range(100, 300),
    );
  });
});

test('a part damaged after it was planned is set aside alone: the other parts of its publication are planned again and published', async () => {
  await stageRows(tableDir, { partitions: 1, perPartition: 100, rowsPerPart: 100 });
  await stageRows(tableDir, { partitions: 1, perPartition: 100, rowsPerPart: 100, from: 100 });
  const { logger, lines } = capturingLogger();
  let damaged: string | undefined;
  const m = await openMaterializer(tableDir, lanceDir, {
    logger,
    deadLetterFile,
    maxPermanentFailures: 1,
    fetchPermits: 1, // parts read one after the other: the first read damages the second part
    hooks: {
      fetched: async (part) => {
        if (damaged !== undefined || part.ranges[0]!.firstOffset !== 0) return;
        const [other] = (await fsp.readdir(tableDir)).filter(
          (n) => n.endsWith('.arrows') && path.join(tableDir, n) !== part.path,
        );
        damaged = path.join(tableDir, other!);
        const bytes = await fsp.readFile(damaged);
        bytes[Math.floor(bytes.length / 2)]! ^= 0x01; // one bit in a value buffer
        await fsp.writeFile(damaged, bytes);
      },
    },
  });
  m.setOwnership(ownershipOf(1, chainA, 200));
  expect(await m.runOnce()).toEqual([]); // the plan of both parts fails on the damaged one
  expect(lines.find((l) => l.event === 'publication.quarantined')).toMatchObject({
    reason: 'part-corrupt',
    quarantined: [damaged],
    replanned: 1,
  });
  expect((await m.runOnce()).map((r) => r.rows)).toEqual([100]);
  expect(await offsetsInLance()).toEqual(range(0, 100));
  expect(await quarantine()).toEqual([path.basename(damaged!)]);
  expect(await ledgerFiles(tableDir)).toEqual([]);
  m.close();
});

test('tables setting publications aside at once write the shared dead-letter file one at a time: no interleaved lines', async () => {
  const { FileDeadLetterSink } = await import('../../src/dead-letters/dead-letter');
  // Sinks that have written and are not closed yet: two at once could interleave their lines.
  let open = 0;
  let most = 0;
  const writing = new WeakSet<object>();
  const origWrite = FileDeadLetterSink.prototype.write;
  const origClose = FileDeadLetterSink.prototype.close;
  FileDeadLetterSink.prototype.write = async function (
    this: InstanceType<typeof FileDeadLetterSink>,
    letters,
  ) {
    if (!writing.has(this)) {
      writing.add(this);
      open += 1;
      most = Math.max(most, open);
    }
    await new Promise((r) => setImmediate(r));
    return origWrite.call(this, letters);
  };
  FileDeadLetterSink.prototype.close = async function (this: InstanceType<typeof FileDeadLetterSink>) {
    if (writing.delete(this)) open -= 1;
    return origClose.call(this);
  };
  try {
    const tables = ['t1', 't2', 't3'];
    const ms = [];
    for (const t of tables) {
      const td = path.join(dir, 'staging', t);
      await stageWithColumn(td, { partition: 0, from: 0, to: 100, column: 'score', type: 'float64' });
      const m = await openMaterializer(td, lanceDir, {
        lance: { uri: lanceDir, table: t },
        deadLetterFile,
        maxPermanentFailures: 1,
      });
      m.setOwnership(ownershipOf(1, chainA, 300));
      await m.runOnce();
      await stageWithColumn(td, { partition: 0, from: 100, to: 300, column: 'score', type: 'utf8' });
      ms.push(m);
    }
    // Each table's publication fails for good at once and is set aside: three writers of one file.
    await Promise.all(ms.map((m) => m.runOnce()));
    expect(most).toBe(1);
    const letters = await deadLetters(); // every line parses
    expect(letters).toHaveLength(3 * 200);
    for (const m of ms) m.close();
  } finally {
    FileDeadLetterSink.prototype.write = origWrite;
    FileDeadLetterSink.prototype.close = origClose;
  }
});
