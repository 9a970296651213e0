import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { decodeChain } from '../../src/ownership/chain';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import {
  assignedOf,
  checkFaultRun,
  ownerOf,
  settle,
  until,
  waitForJoin,
  type Named,
} from '../support/faults';
import { produceRecords, writeConsumer, type Produced } from '../support/ingestion-fixture';
import { testBrokers, uniqueName } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';

/**
 * Scale-down in 'staged' mode: a replica leaves committed but unpublished parts on its
 * volume when it is stopped (or killed) before its publications end, and that volume may be
 * mounted again only much later. Real replica processes on the real broker; the ownership
 * chain's bound is lowered (KAFKA_LANCE_TEST_MAX_CHAIN_BYTES) so that a handful of
 * rebalances drop an epoch from it, as ~85 do in production. Run after `npm run build`
 * (replicas run from dist/).
 */
const suite = brokerSuite('kl-scale-down');
const PARTITIONS = 2;
const RECORDS = 2_000;
/**
 * Room for three entries (the first carries the topic id): a fourth claim of a partition
 * drops its oldest epoch. Each entry more is a rebalance round more, and the hazard is
 * the same at any bound above the minimum of two entries.
 */
const CHAIN_BYTES = '180';
const env = { KAFKA_LANCE_TEST_MAX_CHAIN_BYTES: CHAIN_BYTES };

/** A definition for the topic with publication held back for ten minutes: it stages and commits only. */
async function heldDefinition(file: string): Promise<string> {
  const definition = JSON.parse(await fsp.readFile(file, 'utf8')) as Record<string, unknown>;
  const dir = path.join(suite.work, uniqueName('held'));
  await fsp.mkdir(dir);
  return writeConsumer(dir, {
    ...definition,
    materializer: { maxPublicationDelayMs: 600_000, pollMs: 200 },
  });
}

async function partsIn(dataDir: string): Promise<string[]> {
  const dir = path.join(dataDir, 'staging', 'logs');
  const names = await fsp.readdir(dir).catch(() => [] as string[]);
  return names.filter((n) => n.endsWith('.arrows') || n.endsWith('.arrows.part'));
}

async function committedAtEnd(groupId: string, topic: string): Promise<boolean> {
  const ends = await suite.admin.fetchTopicOffsets(topic);
  const [committed] = await suite.admin.fetchOffsets({ groupId, topics: [topic] });
  return ends.every((e) => committed!.partitions.find((p) => p.partition === e.partition)?.offset === e.high);
}

/**
 * Rebalances: each start of a replica B claims both partitions anew (one chain entry each);
 * more records arrive meanwhile, which B publishes. Until `owner`'s epochs are gone from
 * every chain of the topic.
 */
async function churnUntilDropped(
  file: string,
  bDir: string,
  groupId: string,
  topic: string,
  owner: string,
  produced: Produced[],
): Promise<Named[]> {
  const others: Named[] = [];
  for (let round = 0; ; round++) {
    const b: Named = { label: `B${round}`, process: new ReplicaProcess(file, bDir, testBrokers(), env) };
    others.push(b);
    await waitForJoin(b.process, 0, (j) => assignedOf(j).length === PARTITIONS);
    produced.push(...(await produceRecords(suite.kafka, topic, PARTITIONS, 100, undefined, produced.length)));
    await until('B committed every record', () => committedAtEnd(groupId, topic).then((d) => d || undefined));
    expect((await b.process.kill('SIGTERM')).code).toBe(0);
    const [committed] = await suite.admin.fetchOffsets({ groupId, topics: [topic] });
    const chains = committed!.partitions.map((p) => decodeChain(p.metadata));
    if (chains.every((c) => c.every((e) => e.owner !== owner))) return others;
    if (round >= 20) throw new Error(`the chain never dropped ${owner}'s epoch: is the bound lowered?`);
  }
}

/** A's ordinal back on its volume with the ordinary definition; every record must end in Lance once. */
async function returnAndCheck(options: {
  file: string;
  aDir: string;
  lanceDir: string;
  groupId: string;
  topic: string;
  produced: readonly Produced[];
  replicas: readonly Named[];
}): Promise<void> {
  const { file, aDir, lanceDir, groupId, topic, produced, replicas } = options;
  const back: Named = { label: 'A2', process: new ReplicaProcess(file, aDir, testBrokers(), env) };
  await waitForJoin(back.process, 0, (j) => assignedOf(j).length === PARTITIONS);
  const settled = await settle(suite.admin, groupId, topic, lanceDir, produced.length, { quietMs: 8_000 });
  const unresolvable = back.process.logs.filter((l) => l.event === 'publication.unresolvable');
  expect((await back.process.kill('SIGTERM')).code).toBe(0);
  const report = await checkFaultRun({
    admin: suite.admin,
    groupId,
    topic,
    lanceDir,
    produced,
    replicas: [...replicas, back],
    problems: settled.problems,
  });
  console.log(`${report.lines.join('\n')}\n${report.problems.join('\n') || 'no problems'}`);
  // Before: A's parts were held as unresolvable for good, its records never published.
  expect(unresolvable).toEqual([]);
  expect(report.problems).toEqual([]);
  expect(await partsIn(aDir)).toEqual([]);
}

async function setUp(label: string) {
  const lanceDir = path.join(suite.work, `${uniqueName(label)}-lance`);
  const consumer = await topicAndConsumer(suite, PARTITIONS, {
    staging: { maxPartBytes: 4 * 1024 * 1024, maxPartAgeMs: 500 },
    lance: { uri: lanceDir },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const held = await heldDefinition(consumer.file);
  const dataDir = (name: string) => fsp.mkdtemp(path.join(suite.work, `data-${name}-`));
  return { lanceDir, ...consumer, held, dataDir };
}

test('a graceful stop publishes every record it committed before it exits, whatever the publication delay: the volume of a replica scaled away holds nothing', async () => {
  const { lanceDir, topic, groupId, held, dataDir } = await setUp('drain');
  const produced = await produceRecords(suite.kafka, topic, PARTITIONS, RECORDS);
  const aDir = await dataDir('A');
  const a: Named = { label: 'A', process: new ReplicaProcess(held, aDir, testBrokers(), env) };
  await waitForJoin(a.process, 0, (j) => assignedOf(j).length === PARTITIONS);
  await until('A committed every record', () => committedAtEnd(groupId, topic).then((d) => d || undefined));
  expect(await partsIn(aDir)).not.toEqual([]); // committed, sealed or open, none published

  const exit = await a.process.kill('SIGTERM');
  expect(exit.code).toBe(0);
  // Before: the stop finished the running publication and exited; every part stayed.
  expect(await partsIn(aDir)).toEqual([]);
  const drained = a.process.logs.find((l) => l.event === 'materializer.drained');
  expect(drained?.left).toBe(0);
  const report = await checkFaultRun({
    admin: suite.admin,
    groupId,
    topic,
    lanceDir,
    produced,
    replicas: [a],
  });
  expect(report.problems).toEqual([]);
}, 180_000);

test('a replica SIGKILLed with committed, unpublished parts returns after more rebalances than the ownership chain holds: each committed record is in Lance once', async () => {
  const { lanceDir, topic, groupId, file, held, dataDir } = await setUp('return');
  const { kafka } = suite;
  const produced = await produceRecords(kafka, topic, PARTITIONS, RECORDS);
  const aDir = await dataDir('A');
  const a: Named = { label: 'A', process: new ReplicaProcess(held, aDir, testBrokers(), env) };
  await waitForJoin(a.process, 0, (j) => assignedOf(j).length === PARTITIONS);
  await until('A committed every record', () => committedAtEnd(groupId, topic).then((d) => d || undefined));
  const aOwner = ownerOf(a.process)!;
  await a.process.kill('SIGKILL');
  expect(await partsIn(aDir)).not.toEqual([]);

  const others = await churnUntilDropped(file, await dataDir('B'), groupId, topic, aOwner, produced);

  await returnAndCheck({ file, aDir, lanceDir, groupId, topic, produced, replicas: [a, ...others] });
}, 420_000);

test('a graceful stop while the table cannot be written leaves its committed parts, and they are published once when the replica returns after more rebalances than the chain holds', async () => {
  const { lanceDir, topic, groupId, file, held, dataDir } = await setUp('store-down');
  const produced = await produceRecords(suite.kafka, topic, PARTITIONS, RECORDS);
  const aDir = await dataDir('A');
  const storeDown = path.join(suite.work, uniqueName('store-down'));
  await fsp.writeFile(storeDown, '');
  const a: Named = {
    label: 'A',
    process: new ReplicaProcess(held, aDir, testBrokers(), {
      ...env,
      // Every Lance add fails (as with a full or unreachable store) while the file exists.
      KAFKA_LANCE_TEST_DISK_FULL_LANCE: storeDown,
      // A short stop: the drain gives up after 4 s of retries.
      KAFKA_LANCE_SHUTDOWN_TIMEOUT_MS: '6000',
    }),
  };
  await waitForJoin(a.process, 0, (j) => assignedOf(j).length === PARTITIONS);
  await until('A committed every record', () => committedAtEnd(groupId, topic).then((d) => d || undefined));
  const aOwner = ownerOf(a.process)!;
  expect((await a.process.kill('SIGTERM')).code).toBe(0);
  const drained = a.process.logs.find((l) => l.event === 'materializer.drained');
  expect(drained?.left).toBeGreaterThan(0); // the store refused: committed parts stay on the volume
  await fsp.rm(storeDown);

  const others = await churnUntilDropped(file, await dataDir('B'), groupId, topic, aOwner, produced);
  await returnAndCheck({ file, aDir, lanceDir, groupId, topic, produced, replicas: [a, ...others] });
}, 420_000);
