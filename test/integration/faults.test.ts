import * as path from 'node:path';
import { Kafka, logLevel, type Admin } from 'kafkajs';
import { decodeChain } from '../../src/kafka/ownership';
import { brokerSuite, topicAndConsumer, type BrokerSuite } from '../support/broker-suite';
import { FaultBroker } from '../support/fault-broker';
import {
  assignedOf,
  checkFaultRun,
  joins,
  ownerOf,
  produceInBackground,
  settle,
  sleep,
  until,
  waitForJoin,
  type Named,
} from '../support/faults';
import { produceRecords } from '../support/ingestion-fixture';
import { TEST_BROKER_PORT } from '../support/kafka-local';
import { testBrokers, uniqueName } from '../support/kafka';
import { ReplicaProcess } from '../support/replica-process';
import { tempDir } from '../support/rows';

/**
 * Real-broker faults around group membership, each ending with the same check
 * (support/faults.ts checkFaultRun): every produced record is in the Lance table
 * exactly once, committed offsets equal the log end, and every partition's ownership
 * chain still holds every claim the replicas made, in order.
 */
const suite = brokerSuite('kl-faults');
const PARTITIONS = 4;
const TEST_TIMEOUT = 300_000;

interface Setup {
  readonly topic: string;
  readonly groupId: string;
  readonly file: string;
  readonly lanceDir: string;
}

/** A topic and a consumer whose replicas publish into one shared Lance table, quickly. */
async function setup(on: BrokerSuite): Promise<Setup> {
  const lanceDir = path.join(suite.work, `${uniqueName('faults')}-lance`);
  const { topic, groupId, file } = await topicAndConsumer(on, PARTITIONS, {
    staging: { maxPartBytes: 4 * 1024 * 1024, maxPartAgeMs: 500 },
    lance: { uri: lanceDir },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  return { topic, groupId, file, lanceDir };
}

const start = async (s: Setup, label: string, brokers: readonly string[], env: NodeJS.ProcessEnv = {}) => ({
  label,
  process: new ReplicaProcess(s.file, await tempDir(`kl-f-${label}`), brokers, env),
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

async function finish(
  s: Setup,
  admin: Admin,
  replicas: readonly Named[],
  produced: Parameters<typeof checkFaultRun>[0]['produced'],
  extra: { problems?: string[]; commitTimeoutMs?: number } = {},
): Promise<void> {
  const settled = await settle(admin, s.groupId, s.topic, s.lanceDir, produced.length, {
    commitTimeoutMs: extra.commitTimeoutMs ?? 90_000,
  });
  const exits: string[] = [];
  for (const r of replicas) {
    const exit = await r.process.kill('SIGTERM');
    if (exit.code !== 0) exits.push(`${r.label} exited ${JSON.stringify(exit)} on SIGTERM`);
  }
  const report = await checkFaultRun({
    admin,
    groupId: s.groupId,
    topic: s.topic,
    lanceDir: s.lanceDir,
    produced,
    replicas,
    problems: [...(extra.problems ?? []), ...settled.problems, ...exits],
  });
  console.log(
    `${expect.getState().currentTestName}\nsettled in ${settled.seconds.toFixed(1)} s\n${report.lines.join('\n')}${
      report.problems.length > 0 ? `\nPROBLEMS:\n- ${report.problems.join('\n- ')}` : '\nno problems'
    }`,
  );
  expect(report.problems).toEqual([]);
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
    const s = await setup(suite);
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
        `${line}; rejoined in epoch ${String(zj.epoch)} with ${back.join(',')} (gained ${JSON.stringify(zj.gained)} revoked ${JSON.stringify(zj.revoked)})`,
      );
      // Records for the zombie's partitions after it came back: its commits of them are
      // where an old chain would erase the other's entries.
      await more(1_000);
      if (!(await untilCaughtUp(admin, s)))
        rounds.push(`round ${round}: commits did not catch up within 60 s`);
    }
    await producing.done;
    console.log(`${rounds.join('\n')}\nthe zombie got its old partitions back in ${sameBack} round(s)`);
    await finish(s, admin, [a, b], [...producing.produced, ...extra]);
  },
  TEST_TIMEOUT,
);

test(
  'session timeout of a live process: the main event loop blocked longer than sessionTimeoutMs, twice, while another replica runs',
  async () => {
    const s = await setup(suite);
    const { kafka, admin } = suite;
    const producing = produceInBackground(kafka, s.topic, PARTITIONS, 20_000, 50, 300);
    const b = await start(s, 'B', testBrokers());
    await b.process.waitForEvent('kafka.join');
    // A's 25th and 80th staged batches block its main thread for 15 s (session timeout 6 s).
    const a = await start(s, 'A', testBrokers(), { KAFKA_LANCE_TEST_BLOCK_LOOP_AT: '25:15000,80:15000' });
    const notes: string[] = [];
    let next = 1_000_000;
    const extra: { partition: number; offset: number; value: string }[] = [];
    for (const nth of [25, 80]) {
      const blocked = await a.process
        .waitFor((l) => l.event === 'test.block-loop' && l.batch === nth, 120_000)
        .catch(() => undefined);
      if (!blocked) {
        notes.push(`A never reached its ${nth}th batch`);
        break;
      }
      const held = assignedOf(joins(a.process).at(-1)!);
      const took = await waitForJoin(
        b.process,
        0,
        (j) => assignedOf(j).length === PARTITIONS && (j.time as number) > (blocked.time as number),
        60_000,
      ).catch(() => undefined);
      const ended = await a.process.waitFor(
        (l) => l.event === 'test.block-loop.end' && l.batch === nth,
        60_000,
      );
      const aj = await waitForJoin(a.process, a.process.logs.indexOf(ended), () => true, 90_000).catch(
        () => undefined,
      );
      notes.push(
        `block at batch ${nth} holding ${held.join(',')}: ${took ? `B took every partition ${((took.time as number) - (blocked.time as number)) / 1000} s into it` : 'B never took every partition'}; A then joined ${aj ? `in epoch ${String(aj.epoch)} with ${assignedOf(aj).join(',')} (gained ${JSON.stringify(aj.gained)})` : 'never'}`,
      );
      // Records for A's partitions after it came back (commits in its old epoch would erase B's entries).
      extra.push(...(await produceRecords(kafka, s.topic, PARTITIONS, 1_000, undefined, next)));
      next += 1_000;
    }
    await producing.done;
    console.log(notes.join('\n'));
    await finish(s, admin, [a, b], [...producing.produced, ...extra]);
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
      await finish(s, admin, [a, b], producing.produced, { commitTimeoutMs: 60_000 });
    },
    TEST_TIMEOUT,
  );
});

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
    'kafkajs crash-restart: one replica’s broker connections are cut mid-stream until kafkajs crashes (restart: true), then restored',
    async () => {
      const s = await setup(own);
      const admin = state.admin!;
      const producing = produceInBackground(state.kafka!, s.topic, PARTITIONS, 24_000, 40, 300);
      const a = await start(s, 'A', [broker!.proxied(0)]);
      await a.process.waitForEvent('kafka.join');
      const b = await start(s, 'B', [broker!.proxied(1)]);
      await untilSplit(a, b);
      const held = assignedOf(joins(a.process).at(-1)!);
      const bFrom = b.process.logs.length;
      const aFrom = a.process.logs.length;
      broker!.proxies[0]!.cut();
      const cutAt = Date.now();
      const crash = await a.process
        .waitFor((l) => l.event === 'kafka.crash' && a.process.logs.indexOf(l) >= aFrom, 180_000)
        .catch(() => undefined);
      const bTook = await waitForJoin(b.process, bFrom, (j) => assignedOf(j).length === PARTITIONS, 60_000)
        .then(() => true)
        .catch(() => false);
      if (bTook) await untilCommittedBy(admin, s, ownerOf(b.process)!, held).catch(() => undefined);
      broker!.proxies[0]!.restore();
      const cutFor = (Date.now() - cutAt) / 1000;
      const rejoined = await waitForJoin(a.process, aFrom, () => true, 120_000).catch(() => undefined);
      await producing.done;
      console.log(
        `A cut off for ${cutFor.toFixed(1)} s holding ${held.join(',')}; kafka.crash: ${crash ? JSON.stringify({ restart: crash.restart, err: String((crash.err as { message?: string } | undefined)?.message) }) : 'none'}; B took every partition: ${bTook}; A rejoined: ${rejoined ? `epoch ${String(rejoined.epoch)} assigned ${assignedOf(rejoined).join(',')} gained ${JSON.stringify(rejoined.gained)}` : 'no'}`,
      );
      const problems: string[] = [];
      if (!crash) problems.push('kafkajs never crashed (no kafka.crash event): the fault did not happen');
      else if (crash.restart !== true) problems.push(`kafka.crash with restart ${String(crash.restart)}`);
      await finish(s, admin, [a, b], producing.produced, { problems });
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
      console.log(`${stopped}\n${started}\nbroker down for ${((Date.now() - down) / 1000).toFixed(1)} s`);
      const after = await produceRecords(state.kafka!, s.topic, PARTITIONS, 8_000, undefined, 16_000);
      await finish(s, admin, [a, b], [...before, ...after]);
    },
    TEST_TIMEOUT,
  );
});
