import { decodeChain } from '../../src/ownership/chain';
import { Campaign, TABLE, type Slot } from '../support/campaign';
import { finalCheck } from '../support/final-check';
import { settle } from '../support/settle';
import { MiB } from '../support/gapped-topics';
import { leftOver } from '../support/ledger-state';
import { sleep } from '../support/random';
import type { ReplicaEvent, ReplicaRun } from '../support/replica';
import { campaignDetails } from '../support/report-lines';
import type { QualifyContext, QualifyStep, QualifyStepReport } from '../step';

/** A publication delay of 2 s, above the default (500 ms): parts are still waiting when a replica stops. */
const PUBLICATION_DELAY_MS = 2_000;
/** Room for about six chain entries (test seam): seven claims of a partition drop its oldest epoch. */
const CHAIN_BYTES = '260';

/**
 * Scale-down in 'staged' mode (section "Scale-down and old epochs" of DESIGN.md). Three
 * replicas with the default publication delay consume a steady stream; one is stopped for
 * good with SIGTERM: it must drain (`materializer.drained` with `left: 0`) and leave no
 * committed, unpublished part on its volume. Then rebalances (a fourth, short-lived member
 * joins and leaves the group, each join and each leave one generation) while the stream
 * goes on. The full run then restarts one of the two remaining replicas with publication
 * held back (a 10-minute `maxPublicationDelayMs`), SIGKILLs it right after one of its
 * commits landed while it holds committed, unpublished parts, makes more rebalances than
 * the ownership chain holds (its bound lowered with KAFKA_LANCE_TEST_MAX_CHAIN_BYTES, so
 * that its epochs are dropped from every chain), and brings it back on its data dir with
 * the ordinary definition. Checks: every record of the log a row or a dead letter, rows
 * unique, committed = log end, no part, plan or `writing` entry left in any data dir, no
 * `publication.unresolvable`.
 */
export const step: QualifyStep = {
  name: 'scale-down',
  title: 'Scale-down: a replica stopped for good, rebalances, a volume back after its epochs left the chain',
  async run(ctx: QualifyContext): Promise<QualifyStepReport> {
    const partitions = ctx.short ? 3 : 6;
    const rebalancesAfterStop = ctx.short ? 8 : 100;
    const c = new Campaign({
      context: ctx,
      name: 'scale-down',
      partitions,
      replicas: 3,
      sessionTimeoutMs: 10_000,
      production: {
        totalBytes: ctx.short ? 12 * MiB : 400 * MiB,
        payloadChars: 2_000,
        bytesPerSecond: ctx.short ? 0.4 * MiB : 0.5 * MiB,
        badEvery: 997,
      },
      definition: {
        materializer: { maxPublicationDelayMs: PUBLICATION_DELAY_MS, pollMs: 250 },
      },
      ...(ctx.short ? {} : { env: { KAFKA_LANCE_TEST_MAX_CHAIN_BYTES: CHAIN_BYTES } }),
    });
    const problems: string[] = [];
    const lines: string[] = [];
    try {
      await c.setUp();
      const production = c.startProduction();
      await sleep(ctx.short ? 4_000 : 20_000);

      // 1. One replica stopped for good (SIGTERM): it drains.
      const gone = c.slots[2]!;
      const stopStarted = Date.now();
      const exit = await gone.run.stop();
      const stopSeconds = (Date.now() - stopStarted) / 1000;
      const drained = gone.run.events.find((e) => e.event === 'materializer.drained');
      const leftAtStop = leftOver(gone.dataDir, TABLE);
      if (exit.code !== 0) problems.push(`${gone.label} exited ${JSON.stringify(exit)} on SIGTERM`);
      if (!drained) problems.push(`${gone.label} logged no materializer.drained`);
      else if (Number(drained.line.left) !== 0)
        problems.push(`${gone.label} drained with left ${String(drained.line.left)}`);
      if (leftAtStop.length > 0)
        problems.push(`${gone.label}'s data dir after its stop: ${leftAtStop.join(', ')}`);
      lines.push(
        `- ${gone.label} stopped for good with SIGTERM at ${c.at(stopStarted)} s (exit ${JSON.stringify(exit)}, ${stopSeconds.toFixed(1)} s): \`materializer.drained\` ${drained ? `publications ${String(drained.line.publications)}, rows ${String(drained.line.rows)}, left ${String(drained.line.left)}` : 'not logged'}; its data dir after: ${leftAtStop.length === 0 ? 'no part, no plan, no `writing` entry' : leftAtStop.join(', ')}`,
      );
      c.log(`${gone.label} stopped: drained ${drained ? String(drained.line.left) : '?'} left`);

      // 2. Rebalances: a short-lived member joins and leaves.
      const survivors = [c.slots[0]!, c.slots[1]!];
      const churn = new Churn(c);
      const first = await rebalance(c, survivors, churn, rebalancesAfterStop, problems);
      lines.push(
        `- ${first.generations} rebalances (distinct generations the two remaining replicas joined) in ${first.cycles} join/leave cycles of a short-lived member, ${first.seconds.toFixed(0)} s, while the stream went on`,
      );
      c.log(`${first.generations} rebalances after the stop`);

      // 3. Full run: SIGKILL with committed, unpublished parts; more rebalances than the chain holds; the volume back.
      let killLine = '';
      let fullSummary = '';
      let unresolvable = 0;
      if (!ctx.short) {
        const held = c.variantDefinition('held', {
          materializer: { maxPublicationDelayMs: 600_000, pollMs: 250 },
        });
        const victim = survivors[1]!;
        await victim.run.stop();
        const run = c.restart(victim, held);
        const join = await run.seen('kafka.join', 120_000);
        if (!join) throw new Error(`${victim.label} did not rejoin with the held definition`);
        const ownerField = run.events.find((e) => e.event === 'replica.start')?.line.owner;
        const owner = typeof ownerField === 'string' ? ownerField : '';
        if (!owner) throw new Error(`${victim.label} logged no owner in replica.start`);
        const aimed = await untilCommittedHeld(c, victim, run);
        const partsAtKill = leftOver(victim.dataDir, TABLE);
        const heldPublications = run.events.filter((e) => e.event === 'publication').length;
        await c.kill(
          victim,
          `right after a commit of ${aimed.partitions} (committed ${aimed.committed}), parts unpublished`,
        );
        if (partsAtKill.length === 0) problems.push(`${victim.label} held no part when killed`);
        const second = await rebalance(c, [survivors[0]!], churn, 0, problems, async () => {
          const [committed] = await c.admin.fetchOffsets({ groupId: c.groupId, topics: [c.topic] });
          return committed!.partitions.every((p) => decodeChain(p.metadata).every((e) => e.owner !== owner));
        });
        const chains = await chainSummary(c);
        c.restart(victim);
        if (!(await victim.run.seen('kafka.join', 120_000))) problems.push(`${victim.label} did not rejoin`);
        killLine = `- ${victim.label} restarted with publication held back (maxPublicationDelayMs 600,000), SIGKILLed right after a commit landed (${aimed.partitions}: committed ${aimed.committed}, ${aimed.records} records committed since its claims; publications of this process before the kill: ${heldPublications}) holding ${partsAtKill.join(', ')}; then ${second.generations} rebalances in ${second.cycles} cycles (${second.seconds.toFixed(0)} s) until its owner \`${owner.slice(0, 12)}\` was in no chain (chain bound ${CHAIN_BYTES} bytes: ${chains}); then back on its data dir with the ordinary definition`;
        lines.push(killLine);
        fullSummary = `; ${victim.label}, restarted with publication held back, was SIGKILLed right after a commit with ${aimed.records} committed, unpublished records (${partsAtKill.join(', ')}), then ${second.generations} more rebalances dropped its epochs from every chain (bound ${CHAIN_BYTES} bytes, ${chains.split(', ')[0] ?? ''}…), and it came back on its data dir`;
        c.log(`${victim.label} back after ${second.generations} rebalances`);
      }

      production.stop();
      await production.done;
      const settled = await settle(c, ctx.short ? 120_000 : 300_000);
      unresolvable = c.count('publication.unresolvable');
      if (unresolvable > 0) problems.push(`${unresolvable} publication.unresolvable events`);
      const alone = c.slots.filter((s) => s !== gone && s !== churn.slot && !s.run.alive).map((s) => s.label);
      if (alone.length > 0) problems.push(`${alone.join(', ')} exited by itself`);
      await c.stopAll();
      const check = await finalCheck(c, settled.stalled);
      problems.push(...check.problems, ...c.notes.filter((n) => n.includes('exited')));
      const passed = problems.length === 0;
      return {
        passed,
        summary:
          `3 replicas ('staged', publication delay ${PUBLICATION_DELAY_MS} ms) consumed a steady stream of ${production.acked()} records on ${partitions} partitions; ${gone.label} stopped for good with SIGTERM drained (left ${drained ? String(drained.line.left) : '?'}, its data dir empty), then ${first.generations} rebalances` +
          fullSummary +
          `. ${check.rows} rows + ${check.deadLetters} dead letters = ${check.logRecords} log records (pylance: ${check.independent?.rows ?? '?'} rows, ${check.independent?.duplicates ?? '?'} duplicates); ${unresolvable} unresolvable; committed = log end; data dirs clean. ` +
          (passed ? 'Passed.' : `FAILED: ${problems.join('; ')}`),
        details: campaignDetails(c, check, [
          ...lines,
          ...problems.filter((p) => !check.problems.includes(p)).map((p) => `- **${p}**`),
        ]),
      };
    } catch (error) {
      problems.push(`step error: ${String(error)}`);
      return {
        passed: false,
        summary: `FAILED: ${problems.join('; ')}`,
        details: [...lines, ...problems.map((p) => `- **${p}**`)],
      };
    } finally {
      await c.close();
    }
  },
};

/**
 * Join/leave cycles of a short-lived member on the `churn` slot's data dir until the
 * `survivors` joined `target` new generations (and `until` holds, when given). Each cycle
 * waits until every survivor joined the generation the newcomer made, so that the join
 * and the leave are two rebalances.
 */
async function rebalance(
  c: Campaign,
  survivors: readonly Slot[],
  churn: Churn,
  target: number,
  problems: string[],
  until?: () => Promise<boolean>,
): Promise<{ generations: number; cycles: number; seconds: number }> {
  const started = Date.now();
  const seen = new Set<number>();
  const base = new Map(survivors.map((s) => [s, s.run.events.length]));
  const collect = () => {
    for (const s of survivors)
      for (const e of s.run.events.slice(base.get(s) ?? 0))
        if (e.event === 'kafka.join') seen.add(Number(e.line.generation));
  };
  let cycles = 0;
  for (;;) {
    collect();
    const done = seen.size >= target && (until ? await until() : true);
    if (done) break;
    if (cycles >= Math.max(target, 10) + 40) {
      problems.push(`rebalances: gave up after ${cycles} cycles (${seen.size} generations)`);
      break;
    }
    cycles += 1;
    const run = churn.start();
    const joined = await run.seen('kafka.join', 60_000);
    if (!joined) problems.push(`churn member did not join (cycle ${cycles})`);
    else {
      const generation = Number(joined.line.generation);
      await Promise.all(
        survivors.map((s) =>
          s.run.events.some((e) => e.event === 'kafka.join' && Number(e.line.generation) >= generation)
            ? Promise.resolve(undefined)
            : s.run.next((e) => e.event === 'kafka.join' && Number(e.line.generation) >= generation, 30_000),
        ),
      );
    }
    const marks = survivors.map((s) => s.run.events.length);
    const exit = await run.stop();
    if (exit.code !== 0) problems.push(`churn member exited ${JSON.stringify(exit)} (cycle ${cycles})`);
    // The leave's generation: the survivors join it.
    await Promise.all(survivors.map((s, i) => joinAfter(s.run, marks[i]!, 30_000)));
    if (cycles % 5 === 0) {
      collect();
      c.log(`rebalances: ${seen.size} generations after ${cycles} cycles`);
    }
  }
  return { generations: seen.size, cycles, seconds: (Date.now() - started) / 1000 };
}

/** The short-lived member: one slot (one data dir), a new process each time. */
class Churn {
  slot: Slot | undefined;
  constructor(private readonly c: Campaign) {}
  start(): ReplicaRun {
    if (this.slot) return this.c.restart(this.slot);
    this.slot = this.c.addSlot('churn');
    return this.slot.run;
  }
}

/** A kafka.join of `run` logged after its event index `mark` (already or still to come). */
async function joinAfter(
  run: ReplicaRun,
  mark: number,
  timeoutMs: number,
): Promise<ReplicaEvent | undefined> {
  const already = run.events.slice(mark).find((e) => e.event === 'kafka.join');
  return already ?? run.next((e) => e.event === 'kafka.join', timeoutMs);
}

/**
 * Waits until a commit of the held replica landed past its claims' starts while its data
 * dir holds parts (committed, not published: publication is held back), and returns at
 * once: the kill follows right after the commit.
 */
async function untilCommittedHeld(
  c: Campaign,
  slot: Slot,
  run: ReplicaRun,
): Promise<{ partitions: string; committed: string; records: number }> {
  const join = [...run.events].reverse().find((e) => e.event === 'kafka.join') as ReplicaEvent;
  const claims = (join.line.claimed as { partition: number; start: number }[] | undefined) ?? [];
  if (claims.length === 0) throw new Error(`${slot.label} claimed no partition`);
  const deadline = Date.now() + 120_000;
  let last = new Map<number, number>();
  for (;;) {
    const [committed] = await c.admin.fetchOffsets({ groupId: c.groupId, topics: [c.topic] });
    const at = new Map(committed!.partitions.map((p) => [p.partition, Number(p.offset)]));
    const moved = claims.filter((cl) => (at.get(cl.partition) ?? -1) > cl.start);
    // Right after a commit of this replica landed (its committed offset moved since the
    // last poll, 100 ms ago), once its volume holds at least two sealed parts.
    const changed = moved.some((cl) => last.size > 0 && at.get(cl.partition) !== last.get(cl.partition));
    const sealed = Number(/(\d+) sealed parts/.exec(leftOver(slot.dataDir, TABLE).join(', '))?.[1] ?? 0);
    if (moved.length === claims.length && changed && sealed >= 2)
      return {
        partitions: moved.map((cl) => `p${cl.partition}`).join(', '),
        committed: moved.map((cl) => `p${cl.partition} ${cl.start}→${at.get(cl.partition)}`).join(', '),
        records: moved.reduce((n, cl) => n + (at.get(cl.partition) ?? 0) - cl.start, 0),
      };
    if (Date.now() > deadline) throw new Error(`${slot.label}: no commit past its claims in 120 s`);
    last = at;
    await sleep(100);
  }
}

async function chainSummary(c: Campaign): Promise<string> {
  const [committed] = await c.admin.fetchOffsets({ groupId: c.groupId, topics: [c.topic] });
  return committed!.partitions
    .sort((a, b) => a.partition - b.partition)
    .map((p) => `p${p.partition} ${decodeChain(p.metadata).length} entries`)
    .join(', ');
}
