import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { Kafka, logLevel, type Admin } from 'kafkajs';
import { decodeChain } from '../../src/ownership/chain';
import { brokerSuite, topicAndConsumer, type BrokerSuite } from '../support/broker-suite';
import { FaultBroker } from '../support/fault-broker';
import {
  assignedOf,
  finishFaultRun,
  joins,
  ownerOf,
  produceInBackground,
  sleep,
  until,
  waitForJoin,
  type Named,
} from '../support/faults';
import { produceRecords } from '../support/ingestion-fixture';
import { TEST_BROKER_PORT } from '../support/kafka-local';
import { faultSessionTimings, testBrokers, uniqueName } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';

/**
 * Real-broker faults around group membership, each ending with the same check
 * (support/faults.ts checkFaultRun): every produced record is in the Lance table
 * exactly once, committed offsets equal the log end, and every partition's ownership
 * chain still holds every claim the replicas made, in order. Failures print the
 * missing offset ranges, duplicates, chains and each replica's joins/crashes.
 *
 * Faults: SIGSTOP/SIGCONT (zombie), a blocked main thread (SIGUSR2 with
 * KAFKA_LANCE_TEST_BLOCK_LOOP_ON_SIGNAL), a failed first claim
 * (KAFKA_LANCE_TEST_FAIL_FIRST_CLAIM), a consumer kafkajs gives up on
 * (KAFKA_LANCE_TEST_LOSE_COORDINATOR_AT), and, on a broker this file starts itself
 * (port KAFKA_FAULT_PORT, default the test broker's + 10; it also takes +1..+3),
 * connections cut at a per-replica TCP proxy until kafkajs crashes and restarts,
 * and a broker stop/start. Run after `npm run build` (replicas run from dist/).
 */
const suite = brokerSuite('kl-faults');
const PARTITIONS = 4;
const TEST_TIMEOUT = 300_000;

interface Setup {
  readonly topic: string;
  readonly groupId: string;
  readonly file: string;
  readonly lanceDir: string;
  readonly sessionTimeoutMs: number;
}

/**
 * The default seal age, publication delay and poll (5 s, 2 s, 1 s): a revoked
 * replica's last parts then wait long enough to meet a zombie's commits, as in the
 * field reports. `quick` shortens them where that race is not the point.
 */
const DEFAULT_TIMINGS = { maxPartAgeMs: 5_000, maxPublicationDelayMs: 2_000, pollMs: 1_000 };
const QUICK_TIMINGS = { maxPartAgeMs: 500, maxPublicationDelayMs: 200, pollMs: 200 };

/**
 * A topic and a consumer whose replicas publish into one shared Lance table, with the
 * shortest session the broker grants these tests (support/kafka.ts): each fault waits for
 * a session to expire at least once.
 */
async function setup(on: BrokerSuite, timings = QUICK_TIMINGS): Promise<Setup> {
  const lanceDir = path.join(suite.work, `${uniqueName('faults')}-lance`);
  const session = await faultSessionTimings(on.admin);
  const { topic, groupId, file } = await topicAndConsumer(on, PARTITIONS, {
    staging: { maxPartBytes: 4 * 1024 * 1024, maxPartAgeMs: timings.maxPartAgeMs },
    lance: { uri: lanceDir },
    materializer: { maxPublicationDelayMs: timings.maxPublicationDelayMs, pollMs: timings.pollMs },
    ...session,
  });
  return { topic, groupId, file, lanceDir, sessionTimeoutMs: session.sessionTimeoutMs };
}

const start = async (s: Setup, label: string, brokers: readonly string[], env: NodeJS.ProcessEnv = {}) => ({
  label,
  // Data directories live in the suite's scratch directory, removed after the file.
  process: new ReplicaProcess(
    s.file,
    await fsp.mkdtemp(path.join(suite.work, `data-${label}-`)),
    brokers,
    env,
  ),
});

/** Both replicas hold partitions (the group settled after the last one joined). */
async function untilSplit(a: Named, b: Named, timeoutMs = 90_000): Promise<void> {
  await until(
    'both replicas holding partitions',
    () => {
      const la = joins(a.process).at(-1);
      const lb = joins(b.process).at(-1);
      if (!la || !lb) return undefined;
      const pa = assignedOf(la);
      const pb = assignedOf(lb);
      return pa.length > 0 && pb.length > 0 && pa.length + pb.length === PARTITIONS ? true : undefined;
    },
    timeoutMs,
  );
}

/** Every partition's chain ends with `owner`'s entry and a data commit above its start landed. */
async function untilCommittedBy(admin: Admin, s: Setup, owner: string, partitions: readonly number[]) {
  await until(
    `commits by ${owner} on ${partitions.join(',')}`,
    async () => {
      const [c] = await admin.fetchOffsets({ groupId: s.groupId, topics: [s.topic] });
      const ok = partitions.every((p) => {
        const row = c!.partitions.find((x) => x.partition === p);
        const last = decodeChain(row?.metadata).at(-1);
        return last?.owner === owner && Number(row!.offset) > last.start;
      });
      return ok ? true : undefined;
    },
    90_000,
  );
}

const signal = (r: Named, sig: NodeJS.Signals) => process.kill(r.process.pid, sig);

/** Waits (bounded) until the group committed up to the log end; says so if not. */
async function untilCaughtUp(admin: Admin, s: Setup, timeoutMs = 60_000): Promise<boolean> {
  return until(
    'committed offsets at the log end',
    async () => {
      const ends = await admin.fetchTopicOffsets(s.topic);
      const [c] = await admin.fetchOffsets({ groupId: s.groupId, topics: [s.topic] });
      return ends.every((e) => c!.partitions.find((p) => p.partition === e.partition)?.offset === e.high)
        ? true
        : undefined;
    },
    timeoutMs,
    500,
  ).catch(() => false);
}

test(
  'zombie replica: SIGSTOPped past the session timeout while the other takes over and commits, SIGCONTed with batches in flight, until it got its old partitions back twice',
  async () => {
    const s = await setup(suite, DEFAULT_TIMINGS);
    const { kafka, admin } = suite;
    const producing = produceInBackground(kafka, s.topic, PARTITIONS, 16_000, 40, 300);
    const a = await start(s, 'A', testBrokers());
    await a.process.waitForEvent('kafka.join');
    const b = await start(s, 'B', testBrokers());
    await untilSplit(a, b);
    const extra: { partition: number; offset: number; value: string }[] = [];
    let next = 1_000_000;
    const more = async (count: number) => {
      extra.push(...(await produceRecords(kafka, s.topic, PARTITIONS, count, undefined, next)));
      next += count;
    };
    const rounds: string[] = [];
    // The harm needs the zombie to be given back the very partitions it held (the
    // assignor orders members by their new ids: a coin flip per round): go on until
    // that happened twice, at most six rounds.
    let sameBack = 0;
    for (let round = 1; round <= 6 && sameBack < 2; round++) {
      const zombie = round % 2 === 1 ? a : b;
      const other = zombie === a ? b : a;
      const held = assignedOf(joins(zombie.process).at(-1)!);
      const from = other.process.logs.length;
      signal(zombie, 'SIGSTOP');
      const stoppedAt = Date.now();
      // The other replica's session survives, the zombie's expires: it takes everything.
      await waitForJoin(other.process, from, (j) => assignedOf(j).length === PARTITIONS, 90_000);
      // More records while the zombie sleeps, and commits of them by the new owner.
      await more(1_000);
      await untilCommittedBy(admin, s, ownerOf(other.process)!, held);
      const zFrom = zombie.process.logs.length;
      const oFrom = other.process.logs.length;
      signal(zombie, 'SIGCONT');
      const line = `round ${round}: ${zombie.label} stopped ${((Date.now() - stoppedAt) / 1000).toFixed(1)} s holding ${held.join(',')}`;
      // The zombie rejoins and the group settles again.
      const zj = await waitForJoin(zombie.process, zFrom, () => true, 90_000);
      await waitForJoin(other.process, oFrom, (j) => assignedOf(j).length < PARTITIONS, 90_000).catch(
        () => undefined,
      );
      const back = assignedOf(joins(zombie.process).at(-1) ?? zj);
      if (back.join() === held.join()) sameBack += 1;
      rounds.push(
        `${line}; rejoined in epoch ${String(zj.epoch)} with ${back.join(',')} (claimed ${JSON.stringify(zj.claimed)} revoked ${JSON.stringify(zj.revoked)})`,
      );
      // Records for the zombie's partitions after it came back: its commits of them are
      // where an old chain would erase the other's entries.
      await more(1_000);
      if (!(await untilCaughtUp(admin, s)))
        rounds.push(`round ${round}: commits did not catch up within 60 s`);
    }
    await producing.done;
    console.log(`${rounds.join('\n')}\nthe zombie got its old partitions back in ${sameBack} round(s)`);
    await finishFaultRun(admin, s, [a, b], [...producing.produced, ...extra]);
  },
  TEST_TIMEOUT,
);

test(
  'session timeout of a live process: its main event loop blocked longer than sessionTimeoutMs with batches in flight, while another replica runs, until it got its old partitions back',
  async () => {
    const s = await setup(suite, DEFAULT_TIMINGS);
    const { kafka, admin } = suite;
    const producing = produceInBackground(kafka, s.topic, PARTITIONS, 16_000, 40, 300);
    const b = await start(s, 'B', testBrokers());
    await b.process.waitForEvent('kafka.join');
    // Each SIGUSR2 blocks A's main thread for twice the session timeout at its next staged batch.
    const a = await start(s, 'A', testBrokers(), {
      KAFKA_LANCE_TEST_BLOCK_LOOP_ON_SIGNAL: String(2 * s.sessionTimeoutMs),
    });
    await untilSplit(a, b);
    const notes: string[] = [];
    let next = 1_000_000;
    const extra: { partition: number; offset: number; value: string }[] = [];
    const more = async (count: number) => {
      extra.push(...(await produceRecords(kafka, s.topic, PARTITIONS, count, undefined, next)));
      next += count;
    };
    // As with the zombie: harm needs A to be given back the partitions it held (a coin
    // flip per rejoin); block again until that happened, at most four times.
    let sameBack = 0;
    for (let round = 1; round <= 4 && sameBack < 1; round++) {
      const held = assignedOf(joins(a.process).at(-1)!);
      const aFrom = a.process.logs.length;
      signal(a, 'SIGUSR2');
      await more(1_000); // batches for A to be staging when it blocks
      const blocked = await a.process.waitFor(
        (l) => l.event === 'test.block-loop' && a.process.logs.indexOf(l) >= aFrom,
        60_000,
      );
      const took = await waitForJoin(
        b.process,
        0,
        (j) => assignedOf(j).length === PARTITIONS && (j.time as number) > (blocked.time as number),
        60_000,
      ).catch(() => undefined);
      // More for B to stage and commit in its takeover epoch while A is blocked.
      if (took) await more(1_000);
      const ended = await a.process.waitFor(
        (l) => l.event === 'test.block-loop.end' && a.process.logs.indexOf(l) >= aFrom,
        60_000,
      );
      const bFrom = b.process.logs.length;
      const aj = await waitForJoin(a.process, a.process.logs.indexOf(ended), () => true, 90_000).catch(
        () => undefined,
      );
      await waitForJoin(b.process, bFrom, (j) => assignedOf(j).length < PARTITIONS, 60_000).catch(
        () => undefined,
      );
      const back = assignedOf(joins(a.process).at(-1)!);
      if (back.join() === held.join()) sameBack += 1;
      notes.push(
        `round ${round}: A blocked at batch ${String(blocked.batch)} holding ${held.join(',')}: ${took ? `B took every partition ${((took.time as number) - (blocked.time as number)) / 1000} s into it` : 'B never took every partition'}; A then joined ${aj ? `in epoch ${String(aj.epoch)} (claimed ${JSON.stringify(aj.claimed)})` : 'never'}, holds ${back.join(',')}`,
      );
      // Records for A's partitions after it came back (commits in its old epoch would erase B's entries).
      await more(1_000);
      if (!(await untilCaughtUp(admin, s)))
        notes.push(`round ${round}: commits did not catch up within 60 s`);
    }
    await producing.done;
    console.log(`${notes.join('\n')}\nA got its old partitions back in ${sameBack} round(s)`);
    await finishFaultRun(admin, s, [a, b], [...producing.produced, ...extra]);
  },
  TEST_TIMEOUT,
);

describe.each(['fetch', 'commit'])('failed claim (KAFKA_LANCE_TEST_FAIL_FIRST_CLAIM=%s)', (step) => {
  test(
    'the first claim of the process fails once: the partitions are still claimed later, consumption does not stall',
    async () => {
      const s = await setup(suite);
      const { kafka, admin } = suite;
      const producing = produceInBackground(kafka, s.topic, PARTITIONS, 20_000, 20, 300);
      const a = await start(s, 'A', testBrokers(), { KAFKA_LANCE_TEST_FAIL_FIRST_CLAIM: step });
      await a.process.waitForEvent('test.fail-claim');
      const failed = await a.process
        .waitFor((l) => l.event === 'kafka.join.failed' || l.event === 'kafka.join', 60_000)
        .then(
          (l) =>
            `A after the failed claim: ${l.event} ${String(l.err && JSON.stringify(l.err)).slice(0, 200)}`,
        );
      // A second replica: a later join, in which A keeps some of its partitions.
      const b = await start(s, 'B', testBrokers());
      await b.process.waitForEvent('kafka.join');
      await producing.done;
      console.log(failed);
      await finishFaultRun(admin, s, [a, b], producing.produced, { commitTimeoutMs: 45_000 });
    },
    TEST_TIMEOUT,
  );
});

test(
  'kafkajs gives up on its consumer (no broker names the coordinator): the replica starts it again, nothing lost or duplicated',
  async () => {
    const s = await setup(suite);
    const { kafka, admin } = suite;
    const producing = produceInBackground(kafka, s.topic, PARTITIONS, 12_000, 20, 300);
    const a = await start(s, 'A', testBrokers(), { KAFKA_LANCE_TEST_LOSE_COORDINATOR_AT: '3' });
    await a.process.waitForEvent('test.lose-coordinator', 60_000);
    const crash = await a.process.waitForEvent('kafka.crash', 30_000);
    const from = a.process.logs.indexOf(crash);
    // Restarted by the replica (kafkajs does not), and joined again in a new epoch.
    const restarting = await a.process.waitForEvent('kafka.consumer.restarting', 30_000);
    const rejoined = await a.process.waitFor(
      (l) => l.event === 'kafka.join' && a.process.logs.indexOf(l) > from,
      60_000,
    );
    await a.process.waitForEvent('kafka.consumer.rejoined', 5_000);
    await producing.done;
    console.log(
      `${String((crash.err as { message?: string } | undefined)?.message)}; ${String(restarting.msg)}; rejoined in epoch ${String(rejoined.epoch)}`,
    );
    // The crash kafkajs would not restart from: the coordinator lookup no broker answered.
    expect(restarting.reason).toBe('broker_unavailable');
    await finishFaultRun(admin, s, [a], producing.produced);
  },
  TEST_TIMEOUT,
);

/** A consumer crash was followed by the replica starting its consumer again (src/kafka/consumer-restart.ts). */
const restartedByReplica = (r: { process: ReplicaProcess }, from: number) =>
  r.process
    .waitFor((l) => l.event === 'kafka.consumer.restarting' && r.process.logs.indexOf(l) >= from, 10_000)
    .then(() => true)
    .catch(() => false);

describe('a broker of the test’s own, behind per-replica TCP proxies', () => {
  let broker: FaultBroker | undefined;
  let own: BrokerSuite;
  const state: { kafka?: Kafka; admin?: Admin } = {};

  beforeAll(async () => {
    broker = await FaultBroker.start(Number(process.env.KAFKA_FAULT_PORT ?? TEST_BROKER_PORT + 10), 2);
    // The test's own clients go straight to the broker, never through a proxy.
    state.kafka = new Kafka({
      clientId: uniqueName('faults'),
      brokers: [broker.address],
      retry: { retries: 12, initialRetryTime: 300 },
      logLevel: logLevel.NOTHING,
    });
    state.admin = state.kafka.admin();
    await state.admin.connect();
    own = {
      kafka: state.kafka,
      get admin() {
        return state.admin!;
      },
      get work() {
        return suite.work;
      },
    };
  }, 240_000);

  afterAll(async () => {
    await ReplicaProcess.killAll();
    await state.admin?.disconnect().catch(() => undefined);
    await broker?.close();
  }, 120_000);

  test(
    'consumer crash-restart: one replica’s broker connections are cut mid-stream until its kafkajs consumer crashes and the replica starts it again, then restored',
    async () => {
      const s = await setup(own, DEFAULT_TIMINGS);
      const admin = state.admin!;
      const producing = produceInBackground(state.kafka!, s.topic, PARTITIONS, 24_000, 40, 300);
      const a = await start(s, 'A', [broker!.proxied(0)]);
      await a.process.waitForEvent('kafka.join');
      const b = await start(s, 'B', [broker!.proxied(1)]);
      await untilSplit(a, b);
      const replicas = [a, b];
      const notes: string[] = [];
      const problems: string[] = [];
      const extra: { partition: number; offset: number; value: string }[] = [];
      let next = 1_000_000;
      // As with the zombie: the harm needs the crashed replica to get its old partitions
      // back; cut again (the other replica next) until that happened, at most 3 times.
      let sameBack = 0;
      for (let round = 1; round <= 3 && sameBack < 1; round++) {
        const victim = replicas[(round - 1) % 2]!;
        const other = replicas[round % 2]!;
        const proxy = broker!.proxies[(round - 1) % 2]!;
        const held = assignedOf(joins(victim.process).at(-1)!);
        const oFrom = other.process.logs.length;
        const vFrom = victim.process.logs.length;
        proxy.cut();
        const cutAt = Date.now();
        const crash = await victim.process
          .waitFor((l) => l.event === 'kafka.crash' && victim.process.logs.indexOf(l) >= vFrom, 180_000)
          .catch(() => undefined);
        if (!crash)
          problems.push(
            `round ${round}: kafkajs never crashed (no kafka.crash event): the fault did not happen`,
          );
        else if (!(await restartedByReplica(victim, vFrom)))
          problems.push(`round ${round}: kafka.crash, and the replica never started its consumer again`);
        const took = await waitForJoin(
          other.process,
          oFrom,
          (j) => assignedOf(j).length === PARTITIONS,
          60_000,
        )
          .then(() => true)
          .catch(() => false);
        if (took) {
          extra.push(...(await produceRecords(state.kafka!, s.topic, PARTITIONS, 1_000, undefined, next)));
          next += 1_000;
          await untilCommittedBy(admin, s, ownerOf(other.process)!, held).catch(() => undefined);
        }
        proxy.restore();
        const cutFor = (Date.now() - cutAt) / 1000;
        const oBack = other.process.logs.length;
        const rejoined = await waitForJoin(victim.process, vFrom, () => true, 120_000).catch(() => undefined);
        await waitForJoin(other.process, oBack, (j) => assignedOf(j).length < PARTITIONS, 60_000).catch(
          () => undefined,
        );
        const back = assignedOf(joins(victim.process).at(-1)!);
        if (back.join() === held.join()) sameBack += 1;
        notes.push(
          `round ${round}: ${victim.label} cut off for ${cutFor.toFixed(1)} s holding ${held.join(',')}; kafka.crash: ${crash ? String((crash.err as { message?: string } | undefined)?.message) : 'none'}; ${other.label} took every partition: ${took}; ${victim.label} rejoined: ${rejoined ? `epoch ${String(rejoined.epoch)} claimed ${JSON.stringify(rejoined.claimed)}` : 'no'}, holds ${back.join(',')}`,
        );
        // Records after it came back: its commits of them in an old epoch would erase entries.
        extra.push(...(await produceRecords(state.kafka!, s.topic, PARTITIONS, 1_000, undefined, next)));
        next += 1_000;
        if (!(await untilCaughtUp(admin, s)))
          notes.push(`round ${round}: commits did not catch up within 60 s`);
      }
      await producing.done;
      console.log(
        `${notes.join('\n')}\nthe crashed replica got its old partitions back in ${sameBack} round(s)`,
      );
      await finishFaultRun(admin, s, [a, b], [...producing.produced, ...extra], { problems });
    },
    TEST_TIMEOUT,
  );

  test(
    'broker restart while two replicas consume: they resume by themselves, nothing lost or duplicated',
    async () => {
      const s = await setup(own);
      const admin = state.admin!;
      const before = await produceRecords(state.kafka!, s.topic, PARTITIONS, 16_000);
      const a = await start(s, 'A', [broker!.proxied(0)]);
      const b = await start(s, 'B', [broker!.proxied(1)]);
      await untilSplit(a, b);
      // Stop while they are still consuming the backlog.
      const stopped = await broker!.stop();
      const down = Date.now();
      await until(
        'both replicas noticing the broker is gone',
        () =>
          [a, b].every((r) =>
            r.process.logs.some(
              (l) => (l.time as number) > down && (l.level >= 40 || l.event === 'kafka.crash'),
            ),
          )
            ? true
            : undefined,
        60_000,
      ).catch(() => undefined);
      await sleep(3_000);
      const started = await broker!.start();
      // How each consumer went down: a closed connection (what kafkajs itself would restart
      // from) or a coordinator lookup no broker answered (what it would leave stopped); the
      // replica starts it again either way. The test named for the second forces it.
      const restarts = [a, b].map(
        (r) =>
          `${r.label}: ${
            r.process.logs
              .filter((l) => (l.time as number) > down && l.event === 'kafka.consumer.restarting')
              .map((l) => String(l.reason))
              .join(', ') || 'no restart'
          }`,
      );
      console.log(
        `${stopped}\n${started}\nbroker down for ${((Date.now() - down) / 1000).toFixed(1)} s; restarts ${restarts.join('; ')}`,
      );
      const after = await produceRecords(state.kafka!, s.topic, PARTITIONS, 8_000, undefined, 16_000);
      // A consumer that crashed again while the broker's coordinator was still loading is
      // started after a doubling wait (2, 4, 8, 16 s): the other replica may have consumed
      // everything meanwhile. Each must join again by itself before the stop, within the
      // longest wait (finishFaultRun reports one that never did).
      await until(
        'every replica joined its group after its last consumer crash',
        () =>
          [a, b].every((r) => {
            const logs = r.process.logs;
            const crash = logs.findLastIndex((l) => l.event === 'kafka.crash');
            return crash < 0 || logs.slice(crash).some((l) => l.event === 'kafka.join');
          })
            ? true
            : undefined,
        70_000,
      ).catch(() => undefined);
      await finishFaultRun(admin, s, [a, b], [...before, ...after]);
    },
    TEST_TIMEOUT,
  );
});
