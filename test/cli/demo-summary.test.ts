import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { Field, Int32, Int64, Schema, TimeUnit, Timestamp, Utf8 } from 'apache-arrow';
import { summarize, type SummaryInput } from '../../src/cli/demo-summary';
import { DemoMismatchError } from '../../src/cli/errors';
import { resolveConsumer } from '../../src/config';
import { tempDir } from '../support/rows';

const SCHEMA = new Schema([
  new Field('_topic', new Utf8(), false),
  new Field('_partition', new Int32(), false),
  new Field('_offset', new Int64(), false),
  new Field('ts', new Timestamp(TimeUnit.MILLISECOND), false),
  new Field('level', new Utf8(), false),
  new Field('service', new Utf8(), false),
  new Field('message', new Utf8(), true),
  new Field('status', new Int32(), true),
]);

/** A small app_logs table with the demo's columns; `duplicate` writes offset 3 of partition 0 twice. */
async function demoTable(dir: string, duplicate: boolean): Promise<void> {
  const levels = ['info', 'warn', 'error'];
  const rows = Array.from({ length: 10 }, (_, i) => ({
    _topic: 'app-logs',
    _partition: i % 2,
    _offset: Math.floor(i / 2),
    ts: new Date(Date.UTC(2026, 10, 30, 12, 0, i)),
    level: levels[i % 3]!,
    service: 'checkout',
    message: `line ${i}`,
    status: i % 3 === 2 ? 500 : 200,
  }));
  if (duplicate) rows.push({ ...rows[6]! });
  const db = await lancedb.connect(path.join(dir, 'lance'));
  (await db.createTable('app_logs', rows, { schema: SCHEMA })).close();
  db.close();
}

function input(dir: string, over: Partial<SummaryInput>): SummaryInput {
  return {
    consumer: resolveConsumer(
      { name: 'app-logs', topics: ['app-logs'], table: 'app_logs', schema: 'infer' },
      'test',
      {},
      { brokers: ['unused:9092'], dataDir: dir },
    ),
    produced: 10,
    broken: 0,
    dead: 0,
    ranges: new Map([
      [0, { from: 0, to: 5 }],
      [1, { from: 0, to: 5 }],
    ]),
    seconds: 1,
    logFile: path.join(dir, 'logs', 'demo.log'),
    replicaExit: 0,
    ...over,
  };
}

describe('demo summary', () => {
  test('numbers that add up: counts by level, the newest errors, the table path and Python snippet', async () => {
    const dir = await tempDir('kl-summary-ok');
    await demoTable(dir, false);
    const lines: string[] = [];
    await summarize((l) => lines.push(l), input(dir, {}));
    const out = lines.join('\n');
    expect(out).toMatch(/^Check +10 published = 10 produced - 0 dead letters: yes$/m);
    expect(out).toMatch(/^Duplicates +0 rows/m);
    expect(out).toMatch(/^By level +error 3 +info 4 +warn 3$/m);
    // Errors are rows 2, 5, 8: newest first.
    const errors = lines.filter((l) => l.includes('app-logs['));
    expect(errors.map((l) => /line \d/.exec(l)![0])).toEqual(['line 8', 'line 5', 'line 2']);
    expect(out).toContain(`lance.dataset('${path.join(dir, 'lance', 'app_logs.lance')}').count_rows()`);
    await fsp.rm(dir, { recursive: true, force: true });
  });

  test('numbers that do not add up fail the demo, naming each problem', async () => {
    const dir = await tempDir('kl-summary-bad');
    await demoTable(dir, true);
    const failure = summarize(() => undefined, input(dir, { produced: 12, dead: 1, broken: 2 }));
    await expect(failure).rejects.toBeInstanceOf(DemoMismatchError);
    const error = (await failure.catch((e: unknown) => e)) as DemoMismatchError;
    // 11 rows = 12 produced - 1 dead letter holds; the dead letters and the duplicate do not.
    expect(error.problems).toEqual([
      '1 dead letters, but 2 lines were broken on purpose',
      '1 duplicate (_topic, _partition, _offset) rows',
    ]);
    await fsp.rm(dir, { recursive: true, force: true });
  });

  test('a run that published nothing fails with the mismatch, not a crash', async () => {
    const dir = await tempDir('kl-summary-empty');
    const failure = summarize(() => undefined, input(dir, {}));
    const error = (await failure.catch((e: unknown) => e)) as DemoMismatchError;
    expect(error).toBeInstanceOf(DemoMismatchError);
    expect(error.problems).toEqual(['0 rows published, expected 10 produced - 0 dead letters = 10']);
    await fsp.rm(dir, { recursive: true, force: true });
  });
});
