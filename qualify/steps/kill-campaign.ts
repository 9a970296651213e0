import { Campaign, TABLE, type Slot } from '../support/campaign';
import { openPublications } from '../support/ledger-state';
import { finalCheck } from '../support/final-check';
import { settle } from '../support/settle';
import { campaignDetails } from '../support/report-lines';
import { sleep } from '../support/random';
import type { QualifyContext, QualifyStep, QualifyStepReport } from '../step';

const MiB = 1024 * 1024;
const SESSION_TIMEOUT_MS = 8_000;

type Aim = 'publication' | 'recovery' | 'group join' | 'random moment';

/**
 * Two replicas consume ≥ 192 MiB of checksummed JSON records (20 MiB short)
 * while a random one is SIGKILLed at least 10 times (3 short), aimed at publications
 * (after a `staging.sealed`), recoveries (right after a restart) and group joins (after
 * staging recovery, before `kafka.join`), each restarted from its data dir; one is
 * SIGSTOPped past its session timeout and SIGCONTed (a zombie). Then quiescence and the
 * final check of support/final-check.ts.
 */
export const step: QualifyStep = {
  name: 'kill-campaign',
  title: 'Kill campaign: replicas SIGKILLed at publications, recoveries and joins, and a zombie',
  run: (ctx: QualifyContext) =>
    runKillCampaign(ctx, {
      name: 'kill',
      replicas: 2,
      totalBytes: ctx.short ? 20 * MiB : 192 * MiB,
      bytesPerSecond: ctx.short ? 0.6 * MiB : 1.25 * MiB,
    }),
};

export interface KillCampaignOptions {
  readonly name: string;
  readonly replicas: number;
  readonly totalBytes: number;
  readonly bytesPerSecond: number;
  /** The shared table's database (default: a directory in the work dir). */
  readonly lance?: { readonly uri: string; readonly storageOptions?: Readonly<Record<string, string>> };
  /** Where the table lives, for the summary. */
  readonly store?: string;
  /** SIGSTOP the zombie while its ledger holds a `writing` publication: inside its Lance add. */
  readonly zombieInAdd?: boolean;
}

/** The kill campaign (SIGKILLs and a zombie), on whatever store `o.lance` names. */
export async function runKillCampaign(
  ctx: QualifyContext,
  o: KillCampaignOptions,
): Promise<QualifyStepReport> {
  const { totalBytes } = o;
  const kills = ctx.short ? 3 : 12;
  const c = new Campaign({
    context: ctx,
    name: o.name,
    partitions: 6,
    replicas: o.replicas,
    sessionTimeoutMs: SESSION_TIMEOUT_MS,
    ...(o.lance ? { lance: o.lance } : {}),
    production: {
      totalBytes,
      payloadChars: 4_000,
      bytesPerSecond: o.bytesPerSecond,
      badEvery: 997,
    },
  });
  const zombie: string[] = [];
  try {
    await c.setUp();
    const production = c.startProduction();
    let round = 0;
    const ticker = setInterval(
      () =>
        c.log(
          `produced ${(production.bytes() / MiB).toFixed(1)}/${(totalBytes / MiB).toFixed(0)} MiB, ${c.kills.length} kills (round ${round}/${kills}), publications ${c.count('publication')}`,
        ),
      ctx.short ? 10_000 : 15_000,
    );
    try {
      const aims: Aim[] = ['publication', 'recovery', 'group join', 'random moment'];
      const zombieAfter = Math.floor(kills / 2);
      for (let i = 0; i < kills; i++) {
        round = i + 1;
        if (i === zombieAfter) zombie.push(...(await makeZombie(c, o.zombieInAdd === true)));
        const slot = c.random.pick(c.slots);
        await sleep(c.random.int(1_000, ctx.short ? 3_000 : 5_000));
        await killAimed(c, slot, aims[i % aims.length]!);
      }
      await production.done;
    } finally {
      clearInterval(ticker);
    }
    c.log(
      `production done: ${(production.bytes() / MiB).toFixed(1)} MiB, ${production.acked()} records; settling`,
    );
    const settled = await settle(c, ctx.short ? 120_000 : 300_000);
    await c.stopAll();
    const check = await finalCheck(c, settled.stalled);
    const seconds = c.at();
    const passed = check.problems.length === 0 && c.kills.length >= kills;
    return {
      passed,
      summary:
        `${(production.bytes() / MiB).toFixed(1)} MiB in ${check.logRecords} records on 6 partitions, ${o.replicas} replicas${o.store ? ` into one table on ${o.store}` : ''}, ${c.kills.length} SIGKILLs ` +
        `(${summarizeInterrupted(c)}) each followed by a restart from the replica's data dir, and one zombie (SIGSTOP${o.zombieInAdd ? ' inside a Lance add' : ''} past the ${SESSION_TIMEOUT_MS / 1000} s session timeout, then SIGCONT). ` +
        `Quiescent ${settled.seconds.toFixed(0)} s after production ended. ${check.rows} rows = ${check.logRecords} − ${check.deadLetters} dead letters` +
        ` (pylance: ${check.independent?.rows ?? '?'} rows, ${check.independent?.duplicates ?? '?'} duplicates, ${check.independent?.checksumMismatches ?? '?'} checksum mismatches). ` +
        (passed ? 'Passed.' : `FAILED: ${check.problems.join('; ')}`) +
        ` ${seconds.toFixed(0)} s.`,
      details: campaignDetails(c, check, zombie),
    };
  } finally {
    await c.close();
  }
}

function summarizeInterrupted(c: Campaign): string {
  const by = new Map<string, number>();
  for (const k of c.kills) {
    const what = k.interrupted.split(' (')[0]!;
    by.set(what, (by.get(what) ?? 0) + 1);
  }
  return [...by].map(([what, n]) => `${n} during ${what}`).join(', ');
}

/**
 * Kills the slot's replica at the moment aimed at, then restarts it from its data dir
 * after a short random pause (another member may take its partitions meanwhile).
 */
async function killAimed(c: Campaign, slot: Slot, aim: Aim): Promise<void> {
  if (aim === 'publication') {
    // Into an open publication: the ledger holds its plan or `writing` entry until it is
    // published; every other time, into the Lance add itself (`writing`).
    await untilPublicationOpen(slot, 20_000, c.kills.length % 2 === 1);
    await sleep(c.random.int(0, 60));
    await c.kill(slot, aim);
  } else if (aim === 'recovery') {
    // Kill into a publication first (its restart then has one to resume), restart, and kill
    // the new process as soon as it starts recovering.
    await untilPublicationOpen(slot, 20_000);
    await c.kill(slot, 'publication');
    await sleep(c.random.int(200, 1_500));
    const run = c.restart(slot);
    // As soon as it starts recovering: staging recovery, or resuming a publication the kill interrupted.
    await c.next(run, (e) => e.event === 'replica.start' || e.event === 'publication.resume', 30_000);
    await c.kill(slot, aim);
  } else if (aim === 'group join') {
    await c.kill(slot, 'random moment');
    await sleep(c.random.int(200, 1_500));
    const run = c.restart(slot);
    // Recovered, now joining: the other member is in the same rebalance.
    await c.next(run, (e) => e.event === 'staging.recovery' || e.event === 'publication.recovery', 30_000);
    await sleep(c.random.int(0, 400));
    await c.kill(slot, aim);
  } else {
    await sleep(c.random.int(0, 3_000));
    await c.kill(slot, aim);
  }
  await sleep(c.random.int(300, 3_000));
  const run = c.restart(slot);
  await run.seen('kafka.join', 60_000);
}

/** Polls the slot's ledger until a publication is planned or writing (only writing: `writing`), or the time is up. */
async function untilPublicationOpen(slot: Slot, timeoutMs: number, writing = false): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && slot.run.alive) {
    const open = openPublications(slot.dataDir, TABLE);
    if (open.writing.length > 0 || (!writing && open.planned.length > 0)) return true;
    await sleep(10);
  }
  return false;
}

/**
 * SIGSTOP one replica past its session timeout, SIGCONT it, and say what it did next;
 * `inAdd`: only once its ledger holds a `writing` publication (its Lance add under way),
 * so that the commit it finishes on waking lands after its partitions moved.
 */
async function makeZombie(c: Campaign, inAdd: boolean): Promise<string[]> {
  const slot = c.random.pick(c.slots);
  const inWrite = inAdd ? await untilPublicationOpen(slot, 30_000, true) : false;
  const run = slot.run;
  const stoppedAt = c.at();
  const pauseMs = SESSION_TIMEOUT_MS + 6_000;
  c.log(`zombie: SIGSTOP ${slot.label} (pid ${run.pid}) for ${pauseMs / 1000} s`);
  const from = run.events.length;
  run.signal('SIGSTOP');
  await sleep(pauseMs);
  run.signal('SIGCONT');
  c.log(`zombie: SIGCONT ${slot.label}`);
  const rejoined = await run.next((e) => e.event === 'kafka.join', 60_000);
  const after = run.events.slice(from);
  const names = [...new Set(after.map((e) => e.event))].slice(0, 12).join(', ');
  return [
    `- Zombie: ${slot.label} (pid ${run.pid}) SIGSTOPped${inAdd ? (inWrite ? ' with a publication `writing` (inside its Lance add)' : ' (no `writing` publication seen within 30 s)') : ''} at ${stoppedAt} s for ${pauseMs / 1000} s (session timeout ${SESSION_TIMEOUT_MS / 1000} s), SIGCONTed; ` +
      (rejoined
        ? `it rejoined the group ${((rejoined.time - c.started) / 1000).toFixed(1)} s into the run`
        : 'it did not log a rejoin within 60 s') +
      `; its events after waking: ${names || 'none'}` +
      `; commits refused: ${after.filter((e) => e.event === 'kafka.commit.refused').length}`,
  ];
}
