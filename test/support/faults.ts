import * as lancedb from '@lancedb/lancedb';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';
import type { Admin, Kafka } from 'kafkajs';
import { decodeChain, type ChainEntry } from '../../src/ownership/chain';
import { produceRecords, type Produced } from './ingestion-fixture';
import type { LogLine, ReplicaProcess } from '../../src/harness/replica-process';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it returns a value (not undefined) or the time is up (then throws `what`). */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 90_000,
  pollMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(pollMs);
  }
}

/** Produces in the background, in slices with pauses, so that faults land mid-stream. */
export function produceInBackground(
  kafka: Kafka,
  topic: string,
  partitions: number,
  total: number,
  slices: number,
  pauseMs = 300,
  firstN = 0,
) {
  const produced: Produced[] = [];
  let next = firstN;
  const done = (async () => {
    const per = Math.ceil(total / slices);
    for (let start = 0; start < total; start += per) {
      const count = Math.min(per, total - start);
      produced.push(...(await produceRecords(kafka, topic, partitions, count, undefined, next)));
      next += count;
      await sleep(pauseMs);
    }
  })();
  return {
    produced,
    done,
    /** The next record number, for producing more after these. */
    get next() {
      return next;
    },
  };
}

/** A replica process with a name for reports; owner ids are read from its logs. */
export interface Named {
  readonly label: string;
  readonly process: ReplicaProcess;
}

export function ownerOf(r: ReplicaProcess): string | undefined {
  return r.logs.find((l) => l.event === 'replica.start')?.owner as string | undefined;
}

export function joins(r: ReplicaProcess, from = 0): LogLine[] {
  return r.logs.slice(from).filter((l) => l.event === 'kafka.join');
}

export function assignedOf(join: LogLine): number[] {
  return (join.assigned as [string, number][]).map(([, p]) => p).sort((a, b) => a - b);
}

/** The newest kafka.join line of a replica at index >= from that passes `test`. */
export function waitForJoin(
  r: ReplicaProcess,
  from: number,
  test: (join: LogLine) => boolean,
  timeoutMs = 90_000,
): Promise<LogLine> {
  return r.waitFor((l) => l.event === 'kafka.join' && r.logs.indexOf(l) >= from && test(l), timeoutMs);
}

/**
 * The checker's reads of a table on s3proxy meet its listing race (a LIST of _versions/
 * answered empty or 500 while a replica commits: "Not found: ..._versions"): a failed
 * read is tried again, up to about 20 s, before it fails the test.
 */
async function retryRead<T>(read: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      if (attempt >= 20) throw error;
      await sleep(1_000);
    }
  }
}

function lanceKeys(lanceDir: string, table: string): Promise<[number, number][]> {
  return retryRead(() => readKeys(lanceDir, table));
}

function lanceCount(lanceDir: string, table: string): Promise<number> {
  return retryRead(() => readCount(lanceDir, table));
}

/** The (partition, offset) of every row of a local Lance table; none while it does not exist. */
export async function readKeys(lanceDir: string, table: string): Promise<[number, number][]> {
  const db = await lancedb.connect(lanceDir, { readConsistencyInterval: 0 });
  try {
    const t = await openTableIfCommitted(db, table);
    if (!t) return [];
    const rows = (await t.query().select(['_partition', '_offset']).toArray()) as {
      _partition: number;
      _offset: bigint;
    }[];
    t.close();
    return rows.map((r) => [r._partition, Number(r._offset)]);
  } finally {
    db.close();
  }
}

async function readCount(lanceDir: string, table: string): Promise<number> {
  const db = await lancedb.connect(lanceDir, { readConsistencyInterval: 0 });
  try {
    const t = await openTableIfCommitted(db, table);
    if (!t) return 0;
    const n = await t.countRows();
    t.close();
    return n;
  } finally {
    db.close();
  }
}

export interface SettleResult {
  /** Problems seen while waiting (a stall), reported with the final check. */
  readonly problems: string[];
  readonly seconds: number;
}

/**
 * Waits until the group's committed offsets reach the log end (or reports a stall
 * after `commitTimeoutMs`), then until the Lance table's row count stops moving: 3 s
 * at exactly `expected`, `quietMs` at any other count (rows that never come: lost or
 * held; or more than produced: duplicates).
 */
export async function settle(
  admin: Admin,
  groupId: string,
  topic: string,
  lanceDir: string,
  expected: number,
  { commitTimeoutMs = 90_000, quietMs = 15_000, rowsTimeoutMs = 120_000 } = {},
): Promise<SettleResult> {
  const started = Date.now();
  const problems: string[] = [];
  try {
    await until(
      'committed offsets at the log end',
      async () => ((await committedVsEnd(admin, groupId, topic)).length === 0 ? true : undefined),
      commitTimeoutMs,
      500,
    );
  } catch {
    const behind = await committedVsEnd(admin, groupId, topic);
    problems.push(
      `stall: committed offsets did not reach the log end within ${commitTimeoutMs} ms: ${behind.join('; ')}`,
    );
  }
  const deadline = Date.now() + rowsTimeoutMs;
  let last = -1;
  let since = Date.now();
  for (;;) {
    const n = await lanceCount(lanceDir, 'logs');
    if (n !== last) {
      last = n;
      since = Date.now();
      // Exactly the produced count: a short quiet period (a late duplicate would show);
      // anything else: rows still coming, or lost (held or cut) or duplicated for good.
    } else if (Date.now() - since >= (n === expected ? 3_000 : quietMs)) break;
    if (Date.now() > deadline) break;
    await sleep(500);
  }
  return { problems, seconds: (Date.now() - started) / 1000 };
}

async function committedVsEnd(admin: Admin, groupId: string, topic: string): Promise<string[]> {
  const ends = await admin.fetchTopicOffsets(topic);
  const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
  const at = new Map(committed!.partitions.map((p) => [p.partition, Number(p.offset)]));
  return ends
    .filter((e) => at.get(e.partition) !== Number(e.high))
    .map((e) => `p${e.partition} committed ${at.get(e.partition)} / log end ${e.high}`);
}

/** Consecutive runs of sorted numbers, as "a-b" strings. */
function runs(sorted: readonly number[]): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < sorted.length) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    out.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return out;
}

interface Claim {
  readonly owner: string;
  readonly epoch: number;
  readonly start: number;
  readonly time: number;
}

const entry = (label: (owner: string) => string, e: { owner: string; epoch: number; start: number }) =>
  `${label(e.owner)}/e${e.epoch}@${e.start}`;

export interface FaultReport {
  readonly problems: string[];
  readonly lines: string[];
}

/**
 * The end-of-test check every fault test shares:
 * - every produced record is in the Lance table exactly once (count, no duplicate
 *   (_partition, _offset), nothing that was never produced), with the missing
 *   offsets as ranges per partition;
 * - committed offsets equal the log end;
 * - every partition's ownership chain holds, in order, every claim (an epoch entry
 *   that landed, as the replicas logged it in `kafka.join` `claimed`): none erased.
 * Returns problems (empty when all holds) and a report of what was seen.
 */
export async function checkFaultRun(options: {
  admin: Admin;
  groupId: string;
  topic: string;
  lanceDir: string;
  produced: readonly Produced[];
  replicas: readonly Named[];
  problems?: readonly string[];
}): Promise<FaultReport> {
  const { admin, groupId, topic, lanceDir, produced, replicas } = options;
  const problems: string[] = [...(options.problems ?? [])];
  const lines: string[] = [];
  const labels = new Map<string, string>();
  for (const r of replicas) {
    const owner = ownerOf(r.process);
    if (owner) labels.set(owner, r.label);
  }
  const label = (owner: string) => labels.get(owner) ?? owner.slice(-6);

  // 1. The Lance table.
  const keys = await lanceKeys(lanceDir, 'logs');
  const count = new Map<string, number>();
  for (const [p, o] of keys) count.set(`${p}:${o}`, (count.get(`${p}:${o}`) ?? 0) + 1);
  const producedKeys = new Set(produced.map((r) => `${r.partition}:${r.offset}`));
  let duplicates = 0;
  const duplicated: string[] = [];
  for (const [k, n] of count) {
    if (n > 1) {
      duplicates += n - 1;
      if (duplicated.length < 10) duplicated.push(`${k}×${n}`);
    }
  }
  const strangers = [...count.keys()].filter((k) => !producedKeys.has(k));
  const missingBy = new Map<number, number[]>();
  for (const r of produced) {
    if (count.has(`${r.partition}:${r.offset}`)) continue;
    const list = missingBy.get(r.partition) ?? [];
    list.push(r.offset);
    missingBy.set(r.partition, list);
  }
  const missing = [...missingBy.values()].reduce((s, l) => s + l.length, 0);
  lines.push(
    `lance: ${keys.length} rows for ${produced.length} produced; ${count.size} distinct; ${missing} missing; ${duplicates} duplicate rows`,
  );
  if (keys.length !== produced.length)
    problems.push(`lance holds ${keys.length} rows, ${produced.length} were produced`);
  if (missing > 0) {
    const detail = [...missingBy]
      .sort(([a], [b]) => a - b)
      .map(
        ([p, l]) =>
          `p${p}: ${l.length} at ${runs(l.sort((a, b) => a - b))
            .slice(0, 12)
            .join(',')}`,
      );
    problems.push(
      `missing ${missing} records (${((100 * missing) / produced.length).toFixed(2)}%): ${detail.join('; ')}`,
    );
  }
  if (duplicates > 0) problems.push(`${duplicates} duplicate rows, e.g. ${duplicated.join(', ')}`);
  if (strangers.length > 0)
    problems.push(`${strangers.length} rows never produced, e.g. ${strangers.slice(0, 5).join(', ')}`);

  // 2. Committed offsets and chains.
  const ends = await admin.fetchTopicOffsets(topic);
  const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
  const claims = new Map<number, Claim[]>();
  for (const r of replicas) {
    for (const j of r.process.logs.filter((l) => l.event === 'kafka.join')) {
      const owner = (j.owner as string | undefined) ?? ownerOf(r.process)!;
      for (const g of j.claimed as { topic: string; partition: number; start: number }[]) {
        const list = claims.get(g.partition) ?? [];
        list.push({ owner, epoch: j.epoch as number, start: g.start, time: j.time as number });
        claims.set(g.partition, list);
      }
    }
  }
  for (const e of [...ends].sort((a, b) => a.partition - b.partition)) {
    const c = committed!.partitions.find((p) => p.partition === e.partition);
    const offset = Number(c?.offset ?? -1);
    const chain: ChainEntry[] = decodeChain(c?.metadata);
    const seen = (claims.get(e.partition) ?? []).sort((a, b) => a.time - b.time || a.start - b.start);
    lines.push(
      `p${e.partition}: committed ${offset} / end ${e.high}; chain ${chain.map((x) => entry(label, x)).join(' ')}; claims logged ${seen.map((x) => entry(label, x)).join(' ')}`,
    );
    if (offset >= 0 && seen.length === 0)
      problems.push(
        `p${e.partition}: committed, but no replica logged a claim of it (kafka.join \`claimed\`): the chain cannot be checked`,
      );
    if (offset !== Number(e.high))
      problems.push(`p${e.partition}: committed offset ${offset} != log end ${e.high}`);
    // Every claim, in order, must still be in the chain (an older prefix may have been
    // dropped to fit the metadata limit, never an entry after a kept one).
    const same = (a: Claim, b: ChainEntry) =>
      a.owner === b.owner && a.epoch === b.epoch && a.start === b.start;
    const firstKept = seen.findIndex((s) => chain.some((x) => same(s, x)));
    const expected = firstKept < 0 ? seen : seen.slice(firstKept);
    const erased = expected.filter((s) => !chain.some((x) => same(s, x)));
    const inChain = expected.filter((s) => chain.some((x) => same(s, x)));
    const order = inChain.every(
      (s, i) =>
        i === 0 || chain.findIndex((x) => same(s, x)) > chain.findIndex((x) => same(inChain[i - 1]!, x)),
    );
    if (erased.length > 0 || (firstKept < 0 && seen.length > 0))
      problems.push(
        `p${e.partition}: claims erased from the ownership chain: ${(firstKept < 0 ? seen : erased).map((x) => entry(label, x)).join(' ')} (chain now ${chain.map((x) => entry(label, x)).join(' ')})`,
      );
    if (!order)
      problems.push(`p${e.partition}: chain out of order: ${chain.map((x) => entry(label, x)).join(' ')}`);
    const strangersInChain = chain.filter((x) => !seen.some((s) => same(s, x)));
    if (strangersInChain.length > 0)
      lines.push(
        `p${e.partition}: chain entries no replica logged as a claim: ${strangersInChain.map((x) => entry(label, x)).join(' ')}`,
      );
  }

  // 3. What the replicas said about it.
  for (const r of replicas) {
    const n = (event: string) => r.process.logs.filter((l) => l.event === event).length;
    const published = r.process.logs
      .filter((l) => l.event === 'publication')
      .reduce((s, l) => s + Number(l.rows ?? 0), 0);
    lines.push(
      `${r.label} (${ownerOf(r.process) ?? '?'}): joins ${n('kafka.join')}, join.failed ${n('kafka.join.failed')}, commits refused ${n('kafka.commit.refused')}, kafka.crash ${n('kafka.crash')}, publications ${n('publication')} (${published} rows), unresolvable ${n('publication.unresolvable')}, stopped ${n('replica.stopped')}`,
    );
    for (const c of r.process.logs.filter((l) => l.event === 'kafka.crash'))
      lines.push(
        `${r.label}: kafka.crash ${String((c.err as { type?: string; message?: string } | undefined)?.type)}: ${String((c.err as { message?: string } | undefined)?.message).slice(0, 200)}`,
      );
    // A consumer that crashed before the stop must have been started again by the replica
    // and joined: otherwise the other replicas consume everything and this one's stopped
    // consumer goes unseen.
    const logs = r.process.logs;
    const stopAt = logs.findIndex((l) => l.event === 'ingestion.stop');
    const before = stopAt < 0 ? logs : logs.slice(0, stopAt);
    const lastCrash = before.findLastIndex((l) => l.event === 'kafka.crash');
    if (lastCrash >= 0 && !before.slice(lastCrash).some((l) => l.event === 'kafka.join'))
      problems.push(`${r.label}: its consumer crashed and never joined its group again`);
    const unresolvable = r.process.logs.filter((l) => l.event === 'publication.unresolvable');
    if (unresolvable.length > 0)
      lines.push(
        `${r.label}: last publication.unresolvable ${JSON.stringify(unresolvable.at(-1)!.parts).slice(0, 600)}`,
      );
  }
  return { problems, lines };
}

/**
 * The end of a fault test: waits until the run settles (commits at the log end, the rows
 * all there and quiet), stops the replicas still running with SIGTERM (each must exit 0),
 * checks the run (checkFaultRun; `alsoRan`: replicas killed earlier, named in the report),
 * prints the report and expects no problem.
 */
export async function finishFaultRun(
  admin: Admin,
  run: { readonly groupId: string; readonly topic: string; readonly lanceDir: string },
  running: readonly Named[],
  produced: readonly Produced[],
  extra: {
    problems?: readonly string[];
    commitTimeoutMs?: number;
    quietMs?: number;
    alsoRan?: readonly Named[];
  } = {},
): Promise<void> {
  const settled = await settle(admin, run.groupId, run.topic, run.lanceDir, produced.length, {
    commitTimeoutMs: extra.commitTimeoutMs ?? 90_000,
    ...(extra.quietMs !== undefined ? { quietMs: extra.quietMs } : {}),
  });
  const exits: string[] = [];
  for (const r of running) {
    const exit = await r.process.kill('SIGTERM');
    if (exit.code !== 0) exits.push(`${r.label} exited ${JSON.stringify(exit)} on SIGTERM`);
  }
  const report = await checkFaultRun({
    admin,
    groupId: run.groupId,
    topic: run.topic,
    lanceDir: run.lanceDir,
    produced,
    replicas: [...(extra.alsoRan ?? []), ...running],
    problems: [...(extra.problems ?? []), ...settled.problems, ...exits],
  });
  console.log(
    `${expect.getState().currentTestName}\nsettled in ${settled.seconds.toFixed(1)} s\n${report.lines.join('\n')}${
      report.problems.length > 0 ? `\nPROBLEMS:\n- ${report.problems.join('\n- ')}` : '\nno problems'
    }`,
  );
  expect(report.problems).toEqual([]);
}
