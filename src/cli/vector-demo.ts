import { mkdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import { loadConsumer, type ResolvedConsumer } from '../config';
import { indexName, isVectorIndex, vectorMinRows } from '../config/index-spec';
import { clusteredEmbeddings, type ClusteredEmbeddings } from './clustered-embeddings';
import {
  freePort,
  progressTicker,
  startEmbeddedBrokerIfNeeded,
  startReplica,
  stopReplica,
  waitReady,
  type DemoOptions,
} from './demo';
import { closeDemoBroker } from './demo-broker';
import { CliError } from './errors';
import { registerCompressionCodecs } from '../kafka/protocol/compression';
import { indexLine } from './inspect';
import { connectAdmin } from './kafka-admin';
import { indexShapes, openExistingTable } from './lance-read';
import { ROOT } from './paths';
import type { ReplicaProcess } from '../harness/replica-process';
import { ensureTopicsServed } from '../kafka/protocol/topic-ready';

export const DOCUMENTS_CONSUMER = path.join(ROOT, 'consumers/documents.ts');
const TOPIC = 'documents';
const DLQ = 'documents.dlq';
const PARTITIONS = 3;
const DIM = 384;
/** Subjects the synthetic documents are about: one cluster of embeddings each. */
const SUBJECTS = [
  'kafka',
  'databases',
  'gardening',
  'cooking',
  'astronomy',
  'music',
  'football',
  'finance',
  'travel',
  'chemistry',
  'poetry',
  'cycling',
] as const;
const SETTLE_TIMEOUT_MS = 120_000;
const SEND_BATCH = 100;
/**
 * The vector demo's own defaults: a document is ~4.6 KB of JSON (384 numbers), so the log
 * demo's 5,000 a second would be 23 MB/s; 500 a second for 30 s is 15,000 documents.
 */
export const VECTOR_DEMO_DEFAULTS = { seconds: 30, rate: 500 } as const;

/** The demo command's options for the vector demo: its own defaults where the user gave none. */
export function vectorDemoOptions(
  opts: { seconds: number; rate: number; dataDir: string; logLevel: string },
  command: { getOptionValueSource(key: string): string | undefined },
): Pick<DemoOptions, 'seconds' | 'rate' | 'dataDir' | 'logLevel'> {
  const given = (name: string) => command.getOptionValueSource(name) !== 'default';
  return {
    seconds: given('seconds') ? opts.seconds : VECTOR_DEMO_DEFAULTS.seconds,
    rate: given('rate') ? opts.rate : VECTOR_DEMO_DEFAULTS.rate,
    dataDir: opts.dataDir,
    logLevel: opts.logLevel,
  };
}

/**
 * The vector demo: consumers/documents.ts on a topic of synthetic documents with
 * 384-dimension embeddings gathered around a dozen subjects. The replica builds the
 * declared IVF_PQ index while the producer runs and folds new documents into it; at the
 * end the demo asks the live table for the nearest neighbours of a new query and prints
 * them with their distances, then the index's line of `kafka-lance inspect`.
 */
export async function runVectorDemo(o: DemoOptions): Promise<void> {
  const dataDir = path.resolve(o.dataDir);
  const logFile = path.join(
    dataDir,
    'logs',
    `vectors-${new Date().toISOString().replace(/[-:]/g, '').slice(0, 15)}.log`,
  );
  mkdirSync(path.dirname(logFile), { recursive: true });
  o.print(`Logs of this run: ${logFile}`);
  const embedded = startEmbeddedBrokerIfNeeded(o);
  const brokers = embedded.brokers;
  registerCompressionCodecs();
  const kafka = new Kafka({ clientId: 'kafka-lance-vector-demo', brokers, logLevel: logLevel.NOTHING });
  const admin = await connectAdmin(kafka, brokers);
  let replica: ReplicaProcess | undefined;
  try {
    await ensureTopicsServed(admin, [
      { topic: TOPIC, numPartitions: PARTITIONS },
      { topic: DLQ, numPartitions: 1 },
    ]);
    const consumer = loadConsumer(DOCUMENTS_CONSUMER, process.env, { brokers, dataDir });
    const vectorIndex = consumer.indexes.find(isVectorIndex);
    if (!vectorIndex) throw new CliError('DEMO_MISMATCH', `${DOCUMENTS_CONSUMER} declares no vector index`);
    const port = await freePort();
    replica = startReplica(brokers, dataDir, port, o.logLevel, logFile, DOCUMENTS_CONSUMER);
    await waitReady(replica, logFile);

    const started = Date.now();
    const data = clusteredEmbeddings({ dim: DIM, clusters: SUBJECTS.length, seed: Date.now() % 100_000 });
    const firstId = await rowsIn(consumer);
    const count = o.seconds * o.rate;
    let produced = 0;
    const ticker = progressTicker(
      async () =>
        `${elapsed(started)}  produced ${produced}/${count}  ${await indexProgress(port, indexName(vectorIndex))}`,
      (l) => o.progress(l),
    );
    let state: TableState = { rows: 0, unindexed: undefined };
    try {
      await produceDocuments(kafka, data, firstId, count, o.rate, (n) => (produced = n));
      // Every document published and the index covering it, or the deadline.
      const deadline = Date.now() + SETTLE_TIMEOUT_MS;
      // A table too small to train the index has none to wait for.
      const trains = firstId + produced >= vectorMinRows(vectorIndex);
      state = await tableState(consumer, indexName(vectorIndex));
      while (
        (state.rows < firstId + produced || (trains && state.unindexed !== 0)) &&
        Date.now() < deadline &&
        replica.alive
      ) {
        await new Promise((r) => setTimeout(r, 1_000));
        state = await tableState(consumer, indexName(vectorIndex));
      }
      ticker.stop();
      o.progress(
        `${elapsed(started)}  produced ${produced}  in Lance ${state.rows - firstId}  not yet indexed ${state.unindexed ?? 'all (no index yet)'}`,
        true,
      );
    } finally {
      ticker.stop();
    }
    o.print('');
    // The replica logs a build a moment after the table shows the index: wait for the line.
    const history = await indexHistory(logFile, indexName(vectorIndex), state.unindexed !== undefined);
    printIndexHistory(o.print, history, indexName(vectorIndex), produced);
    await printNearest(o.print, consumer, data, indexName(vectorIndex));
    const stopped = await stopReplica(replica);
    replica = undefined;
    o.print(`Replica    stopped (exit ${stopped})`);
    o.print(`Logs       ${logFile}`);
  } finally {
    if (replica) await stopReplica(replica);
    await closeDemoBroker(admin, embedded, o.print);
  }
}

/** `count` documents at `rate` per second, ids from `firstId` (so that runs on one data dir add up). */
async function produceDocuments(
  kafka: Kafka,
  data: ClusteredEmbeddings,
  firstId: number,
  count: number,
  rate: number,
  onSent: (n: number) => void,
): Promise<void> {
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  try {
    const t0 = Date.now();
    for (let sent = 0; sent < count;) {
      const batch = Math.min(SEND_BATCH, count - sent);
      const messages = Array.from({ length: batch }, (_, i) => {
        const id = firstId + sent + i;
        const { vector, cluster } = data.next();
        const subject = SUBJECTS[cluster]!;
        return {
          key: String(id),
          value: JSON.stringify({
            id,
            topic: subject,
            title: `${subject} note ${id}`,
            body: `A document about ${subject}.`,
            created_at: new Date().toISOString(),
            embedding: vector,
          }),
        };
      });
      await producer.send({ topic: TOPIC, acks: -1, messages });
      sent += batch;
      onSent(sent);
      // Keep to the rate: wait until the time this many documents are due.
      const due = t0 + (sent / rate) * 1000;
      if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
    }
  } finally {
    await producer.disconnect();
  }
}

/** Published rows and the vector index's unindexed rows (undefined: no index yet). */
type TableState = { rows: number; unindexed: number | undefined };

async function tableState(consumer: ResolvedConsumer, index: string): Promise<TableState> {
  const opened = await openExistingTable(consumer).catch(() => undefined);
  if (!opened) return { rows: 0, unindexed: undefined };
  try {
    const stats = await opened.table.indexStats(index);
    return { rows: await opened.table.countRows(), unindexed: stats?.numUnindexedRows };
  } finally {
    opened.close();
  }
}

async function rowsIn(consumer: ResolvedConsumer): Promise<number> {
  const opened = await openExistingTable(consumer).catch(() => undefined);
  if (!opened) return 0;
  try {
    return await opened.table.countRows();
  } finally {
    opened.close();
  }
}

/** The progress line's index part, from the replica's metrics. */
async function indexProgress(port: number, index: string): Promise<string> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const value = (name: string) =>
    text
      .split('\n')
      .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
      .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  const unindexed = text
    .split('\n')
    .filter((l) => l.startsWith('kafka_lance_index_unindexed_rows{') && l.includes(`index="${index}"`))
    .map((l) => Number(l.slice(l.lastIndexOf(' ') + 1)));
  return (
    `published ${value('kafka_lance_published_records_total')}  ` +
    `not yet indexed ${unindexed.length > 0 ? unindexed[0] : 'all (index not built yet)'}`
  );
}

/** A new query near one subject, answered by the live table: the nearest documents with their distances. */
async function printNearest(
  print: (line: string) => void,
  consumer: ResolvedConsumer,
  data: ClusteredEmbeddings,
  index: string,
): Promise<void> {
  const opened = await openExistingTable(consumer);
  try {
    const subject = 0;
    const query = data.near(subject);
    const hits = await opened.table
      .vectorSearch(query)
      .column('embedding')
      .distanceType('cosine')
      .refineFactor(10)
      .select(['id', 'topic', 'title', '_distance'])
      .limit(5)
      .toArray();
    print(`Nearest    5 documents to a new query about ${SUBJECTS[subject]} (cosine distance, live table):`);
    for (const h of hits as { id: bigint; topic: string; title: string; _distance: number }[])
      print(`  ${String(h.id).padStart(8)}  ${h._distance.toFixed(4)}  ${h.topic.padEnd(10)}  ${h.title}`);
    print('Index      (kafka-lance inspect):');
    for (const shape of await indexShapes(opened.table)) if (shape.name === index) print(indexLine(shape));
  } finally {
    opened.close();
  }
}

type IndexEvent = { event?: string; indexedRows?: number; seconds?: number };

const isBuild = (e: IndexEvent) => e.event === 'lance.index.created' || e.event === 'lance.index.retrained';

/**
 * The index's events in the replica's log. `built`: the table already has the index, so
 * its build's line is waited for (up to 5 s: the log is written after the commit, and a
 * worker's lines reach the file through the main thread).
 */
async function indexHistory(logFile: string, index: string, built: boolean): Promise<IndexEvent[]> {
  const read = () =>
    readFileSync(logFile, 'utf8')
      .split('\n')
      .filter((l) => l.includes(`"index":"${index}"`))
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as IndexEvent];
        } catch {
          return []; // a line still being written
        }
      });
  const deadline = Date.now() + 5_000;
  let events = read();
  while (built && !events.some(isBuild) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    events = read();
  }
  return events;
}

/** What the replica's log says it did to the index: built at how many rows, updated, retrained. */
function printIndexHistory(
  print: (line: string) => void,
  events: readonly IndexEvent[],
  index: string,
  produced: number,
): void {
  const built = events.filter(isBuild);
  const updates = events.filter((e) => e.event === 'lance.index.updated').length;
  if (built.length === 0) {
    print(`Index      ${index} not built: the table holds fewer rows than it trains on`);
    return;
  }
  print(
    `Index      ${index} trained ${built.length} time(s), at ${built.map((e) => e.indexedRows).join(', ')} of ${produced} documents ` +
      `(${built.map((e) => `${(e.seconds ?? 0).toFixed(1)} s`).join(', ')}); new documents folded in ${updates} time(s)`,
  );
}

const elapsed = (started: number) => `${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s`;
