import { Campaign, type CampaignOptions } from './campaign';
import { finalCheck } from './final-check';
import { settle } from './settle';
import { campaignDetails } from './report-lines';
import { sleep } from './random';
import type { QualifyContext, QualifyStepReport } from '../step';

const MiB = 1024 * 1024;

export interface OutageOptions {
  readonly context: QualifyContext;
  readonly name: string;
  /** What goes away (for the report): "the broker", "the S3 store". */
  readonly what: string;
  readonly stop: () => Promise<void>;
  readonly start: () => Promise<void>;
  readonly lance?: CampaignOptions['lance'];
  readonly totalBytes: number;
  readonly bytesPerSecond: number;
  readonly outageMs: number;
}

/**
 * Two replicas and a producer run; once the replicas have published, `what`
 * is stopped for `outageMs` and started again (same data, same port). Nothing else is
 * done by hand: the replicas must carry on by themselves, and the final check must
 * find every record exactly once.
 */
export async function runOutage(o: OutageOptions): Promise<QualifyStepReport> {
  const c = new Campaign({
    context: o.context,
    name: o.name,
    partitions: 6,
    replicas: 2,
    sessionTimeoutMs: 10_000,
    ...(o.lance ? { lance: o.lance } : {}),
    production: {
      totalBytes: o.totalBytes,
      payloadChars: 4_000,
      bytesPerSecond: o.bytesPerSecond,
      badEvery: 997,
    },
  });
  try {
    await c.setUp();
    const production = c.startProduction();
    await Promise.race(c.slots.map((s) => s.run.next((e) => e.event === 'publication', 60_000)));
    await sleep(c.random.int(500, 3_000));
    const stoppedAt = Date.now();
    c.log(`stopping ${o.what}`);
    await o.stop();
    const stoppedFor = Date.now();
    await sleep(o.outageMs);
    c.log(`starting ${o.what} again`);
    await o.start();
    const outage = { from: c.at(stoppedAt), down: (Date.now() - stoppedFor) / 1000 };
    c.log(`${o.what} back after ${outage.down.toFixed(1)} s`);
    await production.done;
    c.log(
      `production done: ${(production.bytes() / MiB).toFixed(1)} MiB, ${production.acked()} records; settling`,
    );
    const settled = await settle(c, 240_000);
    const alive = c.slots.filter((s) => s.run.alive && s.runs.length === 1).length;
    const exitedAlone = c.slots.filter((s) => !s.run.alive).map((s) => s.label);
    await c.stopAll();
    const check = await finalCheck(c, settled.stalled);
    const problems = [...check.problems];
    if (exitedAlone.length > 0) problems.push(`${exitedAlone.join(', ')} exited during the run`);
    const during = (event: string) =>
      c.slots.reduce(
        (n, s) => n + s.run.events.filter((e) => e.event === event && e.time >= stoppedAt).length,
        0,
      );
    const passed = problems.length === 0;
    return {
      passed,
      summary:
        `${o.what[0]!.toUpperCase()}${o.what.slice(1)} stopped ${outage.from} s into the run and started again after ${outage.down.toFixed(0)} s, with 2 replicas consuming ${(production.bytes() / MiB).toFixed(1)} MiB (${check.logRecords} records; the producer retried ${production.retries()} sends). ` +
        `No manual step: ${alive} of 2 replicas ran through it. Quiescent ${settled.seconds.toFixed(0)} s after production ended; ${check.rows} rows = ${check.logRecords} − ${check.deadLetters} dead letters` +
        ` (pylance: ${check.independent?.rows ?? '?'} rows, ${check.independent?.duplicates ?? '?'} duplicates, ${check.independent?.checksumMismatches ?? '?'} checksum mismatches). ` +
        (passed ? 'Passed.' : `FAILED: ${problems.join('; ')}`),
      details: campaignDetails(c, check, [
        `- Outage: ${o.what} stopped at ${outage.from} s, down ${outage.down.toFixed(1)} s; after it the replicas logged ${during('publication.failed')} failed publication attempts, ${during('materializer.retry')} materializer retries, ${during('kafka.crash')} kafka consumer crashes (each restarted by the replica), ${during('kafka.join')} group joins, ${during('publication')} publications`,
        ...problems.filter((p) => !check.problems.includes(p)).map((p) => `- **${p}**`),
      ]),
    };
  } finally {
    await c.close();
  }
}
