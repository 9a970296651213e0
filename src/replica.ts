import * as path from 'node:path';
import { Partitioners, type Admin, type Producer } from 'kafkajs';
import { ulid } from 'ulid';
import { lockDataDir, type DataDirLock } from './common/data-dir-lock';
import { errorMessage } from './common/errors';
import { SchemaSource } from './schema-registry/schema-source';
import { REGISTRY_FORMATS } from './config/formats';
import { createLogger, type Logger } from './common/logger';
import {
  ConfigError,
  loadConsumer,
  type ConsumerOverrides,
  type ResolvedConsumer,
  type ResolvedField,
} from './config';
import { createKafka } from './kafka/client';
import { FileDeadLetterSink, KafkaDeadLetterSink, type DeadLetterSink } from './kafka/dead-letter';
import { Ingestion } from './kafka/ingestion';
import { decodeChain } from './ownership/chain';
import { SequencedSnapshots } from './ownership/snapshots';
import { startLanceStore } from './lance/store-start';
import { redactStorageOptions } from './lance/store-config';
import { MaterializerHost } from './materializer/host';
import { declaredTypeChanges } from './lance/declared-schema';
import { readKnownFields, readTableSchema } from './lance/known-fields';
import type { LanceTarget } from './lance/lance-table';
import type { KnownField } from './decode/record-decoder';
import { Metrics } from './metrics/metrics';
import { DiskPressure } from './kafka/disk-pressure';
import type { OwnershipRow } from './materializer/worker-protocol';
import { StagingPool } from './pool/staging-pool';
import { ClaimRegistry } from './staging/claims';
import { recoverTableStaging } from './staging/recovery';
import { tableStagingDir } from './staging/table-staging';
import { NO_FAULTS, type Faults } from './faults/faults';
import { replicaHooks } from './faults/replica-hooks';
import { shareFaults } from './faults/thread-faults';

export interface ReplicaOptions {
  readonly consumerPath: string;
  readonly overrides?: ConsumerOverrides;
  readonly logger?: Logger;
  /** The registry the replica reports into (the CLI serves it on /metrics). */
  readonly metrics?: Metrics;
  /**
   * Test-only faults (src/faults/faults.ts), parsed once at process start; absent, none.
   * They reach the worker threads this replica starts (shareFaults).
   */
  readonly faults?: Faults;
}

/**
 * One replica of a consumer: the wiring of the stages and their order of start
 * and stop, in one place. Startup: read the group's committed offsets from the
 * broker, recover staging, start the staging workers, then subscribe. Stop: stop
 * fetching, make durable, commit, seal, leave.
 */
export class Replica {
  readonly consumer: ResolvedConsumer;
  readonly owner: string;
  readonly #logger: Logger;
  readonly #admin: Admin;
  readonly #ingestion: Ingestion;
  readonly #deadLetters: DeadLetterSink;
  readonly #failed: Promise<Error>;
  readonly #materializer: MaterializerHost | undefined;
  readonly #ownershipTimer: NodeJS.Timeout | undefined;
  readonly #snapshots: SequencedSnapshots<OwnershipRow[]> | undefined;
  readonly #gaugeTimer: NodeJS.Timeout;
  readonly #dataDirLock: DataDirLock;

  private constructor(
    consumer: ResolvedConsumer,
    owner: string,
    logger: Logger,
    admin: Admin,
    ingestion: Ingestion,
    deadLetters: DeadLetterSink,
    failed: Promise<Error>,
    materializer: MaterializerHost | undefined,
    metrics: Metrics,
    pool: StagingPool,
    dataDirLock: DataDirLock,
  ) {
    this.consumer = consumer;
    this.#dataDirLock = dataDirLock;
    this.owner = owner;
    this.#logger = logger;
    this.#admin = admin;
    this.#ingestion = ingestion;
    this.#deadLetters = deadLetters;
    this.#failed = failed;
    this.#materializer = materializer;
    if (materializer) {
      // The planner needs every partition's chain and landed commit, owned here or not.
      const snapshots = new SequencedSnapshots(
        () => readOwnership(admin, consumer),
        (rows, sequence) => materializer.updateOwnership(rows, sequence),
      );
      const refresh = () =>
        void snapshots
          .refresh()
          .catch((error: unknown) =>
            logger.warn(
              { event: 'materializer.ownership.failed', err: errorMessage(error) },
              'could not read offsets',
            ),
          );
      refresh();
      this.#ownershipTimer = setInterval(refresh, consumer.materializer.pollMs);
      this.#snapshots = snapshots;
    }
    // Gauges read off the running stages; lag needs the log end from the broker.
    let lagInFlight = false;
    this.#gaugeTimer = setInterval(() => {
      const q = pool.queue();
      metrics.queueDepth.set({ queue: 'staging' }, q.records);
      metrics.queueCapacity.set({ queue: 'staging' }, q.maxRecords);
      metrics.queueDepth.set({ queue: 'staging_bytes' }, q.bytes);
      metrics.queueCapacity.set({ queue: 'staging_bytes' }, q.maxBytes);
      metrics.stagingParts.set({ table: consumer.table, state: 'open' }, pool.parts.open);
      metrics.stagingParts.set({ table: consumer.table, state: 'sealing' }, pool.parts.sealing);
      if (lagInFlight) return;
      lagInFlight = true;
      void updateLag(admin, ingestion, metrics)
        .catch(() => undefined)
        .finally(() => (lagInFlight = false));
    }, 1_000);
    this.#gaugeTimer.unref();
  }

  static async start(options: ReplicaOptions): Promise<Replica> {
    const logger = options.logger ?? createLogger();
    const consumer = loadConsumer(options.consumerPath, process.env, options.overrides);
    // Before anything reads or writes the data directory: a second replica on it would
    // recover, plan and publish this one's parts.
    const dataDirLock = await lockDataDir(consumer.dataDir);
    try {
      return await Replica.#start(options, logger, consumer, dataDirLock);
    } catch (error) {
      await dataDirLock.release();
      throw error;
    }
  }

  static async #start(
    options: ReplicaOptions,
    logger: Logger,
    consumer: ResolvedConsumer,
    dataDirLock: DataDirLock,
  ): Promise<Replica> {
    const metrics = options.metrics ?? new Metrics();
    const faults = options.faults ?? NO_FAULTS;
    // Before any worker thread starts: each takes the faults shared at its start.
    if (options.faults) shareFaults(options.faults);
    const owner = ulid();
    const log = logger.child({ consumer: consumer.name, owner });
    const lanceUri = consumer.lance.uri ?? path.join(consumer.dataDir, 'lance');
    log.info(
      {
        event: 'replica.start',
        groupId: consumer.groupId,
        topics: consumer.topics ?? consumer.topicsRegex,
        table: consumer.table,
        dataDir: consumer.dataDir,
        brokers: consumer.brokers,
        client: consumer.client,
        // Option values that hold credentials never reach a log.
        lance: {
          uri: lanceUri,
          storageOptions: redactStorageOptions(consumer.lance.storageOptions),
          commits: consumer.lance.commits,
        },
      },
      'starting replica',
    );
    // Before Kafka: a store that will not take our publications stops the start within
    // seconds, and a store that can lose concurrent commits stops it unless this replica
    // is declared the table's only writer.
    const store = consumer.materializer.enabled
      ? await startLanceStore(
          {
            uri: lanceUri,
            ...(consumer.lance.storageOptions ? { storageOptions: consumer.lance.storageOptions } : {}),
            commits: consumer.lance.commits,
            singleWriter: consumer.lance.singleWriter,
            connectTimeoutMs: consumer.lance.connectTimeoutMs,
          },
          consumer.source,
          process.env,
          log,
        )
      : undefined;
    if (store) metrics.storeAtomicCommits.set({ table: consumer.table }, store.atomic ? 1 : 0);
    // Also before Kafka: a declared field whose type changed stops the start, naming it.
    if (consumer.fields !== undefined) await checkDeclaredTypes(consumer, consumer.fields, log);
    let reportFailure!: (error: Error) => void;
    const failed = new Promise<Error>((resolve) => (reportFailure = resolve));

    const kafka = createKafka(consumer, log);
    const admin = kafka.admin();
    await admin.connect();
    await checkTopicsExist(admin, consumer);
    await logCommittedOffsets(admin, consumer, log);

    const tableDir = tableStagingDir(consumer.dataDir, consumer.table);
    if (faults.recoveryDelayMs > 0) await new Promise((r) => setTimeout(r, faults.recoveryDelayMs)); // test-only: a slow recovery
    await recoverTableStaging({
      tableDir,
      claims: new ClaimRegistry(),
      owner: 'startup-recovery',
      logger: log,
    });

    const deadLetters = await openDeadLetterSink(
      consumer,
      kafka.producer({
        // A missing DLQ topic is an error to report (its partition stops), not a topic
        // to create with broker defaults under a mistyped name.
        allowAutoTopicCreation: false,
        // Bounded: an idempotent producer retries forever, and a write that never ends
        // pins its letters and holds commits with nothing reported. errors.retryTimeoutMs
        // bounds the retries above it; a retried produce may duplicate a dead letter,
        // as a restart may (the DLQ is at-least-once either way).
        idempotent: false,
        retry: { retries: 5 },
        maxInFlightRequests: 1,
        createPartitioner: Partitioners.DefaultPartitioner,
      }),
    );
    const hooks = replicaHooks(faults, log); // test-only fault injection
    // The pool reports staged batches to the ingestion created after it.
    const wiring: { ingestion?: Ingestion; materializer?: MaterializerHost } = {};
    const knownFields = await tableColumns(consumer, log);
    const pool = await StagingPool.start({
      workers: consumer.workers,
      consumerPath: consumer.source,
      knownFields,
      brokers: consumer.brokers,
      tableDir,
      epoch: { owner, epoch: 0 },
      maxPartBytes: consumer.staging.maxPartBytes,
      maxPartAgeMs: consumer.staging.maxPartAgeMs,
      maxOpenParts: consumer.staging.maxOpenParts,
      maxQueueRecords: consumer.queue.maxRecords,
      maxQueueBytes: consumer.queue.maxBytes,
      logger: log,
      onBatchDone: (topic, partition, result) => {
        wiring.ingestion?.onBatchDone(topic, partition, result);
        hooks.onBatchDone();
      },
      onFatal: reportFailure,
      // The catalog takes what the writers know instead of reading each part back.
      onSealed: (parts) => wiring.materializer?.sealed(parts),
    });
    const diskPressure = new DiskPressure(log, metrics);
    const ingestion = new Ingestion({
      consumer,
      diskPressure,
      ...(consumer.schemaRegistry
        ? {
            schemas: new SchemaSource(
              consumer.schemaRegistry,
              log,
              metrics,
              (REGISTRY_FORMATS as readonly string[]).includes(consumer.keyFormat),
            ),
          }
        : {}),
      kafka: hooks.kafka(kafka),
      admin: hooks.admin(admin),
      pool,
      deadLetters,
      owner,
      logger: log,
      initialEpoch: 0,
      metrics,
      tableDir,
      killAtCommit: faults.killAtCommit,
    });
    wiring.ingestion = ingestion;
    const m = consumer.materializer;
    const materializer = m.enabled
      ? await MaterializerHost.start(
          {
            tableDir,
            lance: {
              uri: lanceUri,
              table: consumer.table,
              ...(consumer.lance.storageOptions ? { storageOptions: consumer.lance.storageOptions } : {}),
            },
            owner,
            mode: m.pipelinePreparation ? 'streamed' : 'buffered',
            maxPublicationBytes: m.maxPublicationBytes,
            maxPublicationDelayMs: m.maxPublicationDelayMs,
            fetchPermits: m.fetchPermits,
            decodePermits: m.decodePermits,
            sourceReservationBytes: m.sourceReservationBytes,
            // Rows of publications set aside for good (the table refuses their schema).
            deadLetterFile: path.join(consumer.dataDir, 'dead-letter', `${consumer.name}.publications.jsonl`),
            pollMs: m.pollMs,
            optimizeEveryMs: m.optimizeEveryMs,
            indexes: consumer.indexes,
            indexEveryMs: m.indexEveryMs,
            cleanupOlderThanMs: m.cleanupOlderThanMs,
            storeAtomic: store?.atomic ?? true,
            commitAfter: consumer.offsets.commitAfter,
            logLevel: log.level,
          },
          reportFailure,
          log,
          metrics,
          diskPressure,
        )
      : undefined;
    wiring.materializer = materializer;
    await ingestion.start(reportFailure);
    return new Replica(
      consumer,
      owner,
      log,
      admin,
      ingestion,
      deadLetters,
      failed,
      materializer,
      metrics,
      pool,
      dataDirLock,
    );
  }

  /** Resolves with the error when the replica cannot go on (for example staging failed on disk). */
  get failed(): Promise<Error> {
    return this.#failed;
  }

  get ready(): boolean {
    return this.#ingestion.ready;
  }

  /**
   * Graceful stop: stop fetching, flush, commit, seal, leave the group; then publish what
   * was committed (the drain), starting no publication after `drainUntil` (epoch ms; the
   * caller's own deadline minus the time one publication may take). What a drain cannot
   * publish stays on the data directory, resolvable by any later start on it (DESIGN.md,
   * "Scale-down and old epochs").
   */
  async stop(drainUntil = Date.now() + DEFAULT_DRAIN_MS): Promise<void> {
    this.#logger.info({ event: 'replica.stop' }, 'stopping: stop fetching, flush, commit');
    clearInterval(this.#gaugeTimer);
    await this.#ingestion.stop();
    if (this.#ownershipTimer) clearInterval(this.#ownershipTimer);
    if (this.#snapshots) {
      // A snapshot read after the final commit (the one in flight may predate it): with it
      // the planner sees every committed row as ready. Unreadable (broker gone): the drain
      // publishes what the last snapshot allows, the rest waits on disk.
      // Bounded by the deadline: kafkajs retries a read for tens of seconds when the
      // broker is gone, and the drain is worth nothing after the deadline.
      for (let i = 0; i < 2 && Date.now() < drainUntil; i++) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          this.#snapshots
            .refresh()
            .catch((error: unknown) =>
              this.#logger.warn(
                { event: 'materializer.ownership.failed', err: errorMessage(error) },
                'could not read offsets',
              ),
            ),
          new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, drainUntil - Date.now())))),
        ]);
        clearTimeout(timer);
      }
    }
    // Finish the running publication (never interrupt a Lance add), then drain.
    await this.#materializer?.stop(drainUntil);
    await this.#deadLetters.close();
    await this.#admin.disconnect();
    await this.#dataDirLock.release();
    this.#logger.info({ event: 'replica.stopped', ...this.#ingestion.stats }, 'replica stopped');
  }
}

/** How long a stop without a deadline of its own keeps starting publications. */
const DEFAULT_DRAIN_MS = 15_000;

/**
 * `schema: 'infer'`: the Lance table's column types, so that every staging worker of
 * every replica infers the same ones. A table that cannot be read yet (first start,
 * store unreachable) seeds nothing: the publication-side checks still hold.
 */
async function tableColumns(consumer: ResolvedConsumer, logger: Logger): Promise<KnownField[]> {
  const target = {
    uri: consumer.lance.uri ?? path.join(consumer.dataDir, 'lance'),
    table: consumer.table,
    ...(consumer.lance.storageOptions ? { storageOptions: consumer.lance.storageOptions } : {}),
  };
  if (consumer.fields !== undefined || consumer.format !== 'json') return [];
  try {
    const fields = await readKnownFields(target);
    if (fields.length > 0)
      logger.info({ event: 'schema.seeded', columns: fields }, 'inferred columns seeded from the table');
    return fields;
  } catch (error) {
    logger.warn(
      { event: 'schema.seed.failed', err: errorMessage(error) },
      'could not read the table schema to seed inferred columns',
    );
    return [];
  }
}

/**
 * A declared schema against the existing table: a field whose type changed is refused
 * here, naming it and both types (declared-schema.ts). A table that cannot be read
 * (first start, store unreachable) is not checked: publications still refuse a
 * conflicting column and set the parts aside.
 */
async function checkDeclaredTypes(
  consumer: ResolvedConsumer,
  fields: readonly ResolvedField[],
  logger: Logger,
): Promise<void> {
  const target: LanceTarget = {
    uri: consumer.lance.uri ?? path.join(consumer.dataDir, 'lance'),
    table: consumer.table,
    ...(consumer.lance.storageOptions ? { storageOptions: consumer.lance.storageOptions } : {}),
  };
  let schema;
  try {
    schema = await readTableSchema(target);
  } catch (error) {
    logger.warn(
      { event: 'schema.check.failed', err: errorMessage(error) },
      'could not read the table schema to check the declared types',
    );
    return;
  }
  if (!schema) return;
  const changes = declaredTypeChanges(fields, schema, consumer.table, consumer.epochUnit);
  if (changes.length > 0) {
    throw new ConfigError(
      consumer.source,
      changes.map((c) => ({ field: `schema.fields.${c.field}`, message: c.message })),
    );
  }
}

async function openDeadLetterSink(consumer: ResolvedConsumer, producer: Producer): Promise<DeadLetterSink> {
  const target = consumer.deadLetter;
  if (target && 'topic' in target) {
    await producer.connect();
    return new KafkaDeadLetterSink(producer, target.topic, consumer.name, target.contextHeaders);
  }
  const file = target?.file ?? path.join(consumer.dataDir, 'dead-letter', `${consumer.name}.jsonl`);
  return new FileDeadLetterSink(path.resolve(file));
}

/** A missing topic is a configuration error: say which, instead of kafkajs's "does not host this topic-partition". */
async function checkTopicsExist(admin: Admin, consumer: ResolvedConsumer): Promise<void> {
  if (!consumer.topics) return;
  const existing = new Set(await admin.listTopics());
  const missing = consumer.topics.filter((t) => !existing.has(t));
  if (missing.length > 0) {
    throw new ConfigError(consumer.source, [
      {
        field: 'topics',
        message: `${missing.join(', ')} ${missing.length === 1 ? 'does' : 'do'} not exist on ${consumer.brokers.join(',')}; create ${missing.length === 1 ? 'it' : 'them'} or fix the name`,
      },
    ]);
  }
}

async function logCommittedOffsets(admin: Admin, consumer: ResolvedConsumer, logger: Logger): Promise<void> {
  let topics = consumer.topics;
  if (!topics) {
    const pattern = new RegExp(consumer.topicsRegex!);
    topics = (await admin.listTopics()).filter((t) => pattern.test(t));
  }
  if (topics.length === 0) return;
  try {
    const committed = await admin.fetchOffsets({ groupId: consumer.groupId, topics });
    logger.info(
      {
        event: 'replica.committed-offsets',
        committed: committed.map((t) => ({
          topic: t.topic,
          partitions: t.partitions.map((p) => ({ partition: p.partition, offset: p.offset })),
        })),
      },
      'committed offsets of the group',
    );
  } catch (error) {
    logger.warn(
      { event: 'replica.committed-offsets.failed', err: errorMessage(error) },
      'could not read committed offsets',
    );
  }
}

async function readOwnership(admin: Admin, consumer: ResolvedConsumer): Promise<OwnershipRow[]> {
  let topics = consumer.topics;
  if (!topics) {
    const pattern = new RegExp(consumer.topicsRegex!);
    topics = (await admin.listTopics()).filter((t) => pattern.test(t));
  }
  if (topics.length === 0) return [];
  const committed = await admin.fetchOffsets({ groupId: consumer.groupId, topics });
  return committed.flatMap((t) =>
    t.partitions
      .filter((p) => Number(p.offset) >= 0)
      .map((p) => [t.topic, p.partition, decodeChain(p.metadata), Number(p.offset)] as const),
  );
}

async function updateLag(admin: Admin, ingestion: Ingestion, metrics: Metrics): Promise<void> {
  const owned = ingestion.owned();
  for (const topic of new Set(owned.map((o) => o.topic))) {
    const ends = await admin.fetchTopicOffsets(topic);
    for (const o of owned.filter((x) => x.topic === topic)) {
      const end = ends.find((e) => e.partition === o.partition);
      if (end)
        metrics.consumerLag.set(
          { topic, partition: String(o.partition) },
          Math.max(0, Number(end.high) - o.landed),
        );
    }
  }
}
