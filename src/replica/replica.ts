import * as path from 'node:path';
import { Partitioners, type Admin, type Producer } from 'kafkajs';
import { ulid } from 'ulid';
import { lockDataDir, type DataDirLock } from '../common/data-dir-lock';
import { createLogger, type Logger } from '../common/logger';
import { loadConsumer, type ConsumerOverrides, type ResolvedConsumer } from '../config';
import { REGISTRY_FORMATS } from '../config/formats';
import { FileDeadLetterSink, type DeadLetterSink } from '../dead-letters/dead-letter';
import { createKafka } from '../kafka/protocol/client';
import { compressionType } from '../kafka/protocol/compression';
import { KafkaDeadLetterSink } from '../kafka/protocol/dead-letter-topic';
import { DiskPressure } from '../common/disk-pressure';
import { FAST_BATCH_INSTALLED } from '../kafka/protocol/consumer-batch';
import { RECORD_DECODER_INSTALLED } from '../kafka/protocol/fetched-batch';
import { Ingestion } from '../kafka/ingestion';
import { chainBound } from '../ownership/chain';
import { OwnershipFeed } from './ownership-feed';
import { StagedBatchReports } from './staged-batch-reports';
import { redactStorageOptions } from '../lance/store-config';
import { redactedClient, withoutUserInfo } from '../common/redaction';
import { startLanceStore } from '../lance/store-start';
import { MaterializerHost } from '../materializer/host';
import type { MaterializerWorkerInit } from '../materializer/worker-protocol';
import { Metrics } from '../metrics/metrics';
import { OffsetTracker } from '../ownership/offset-tracker';
import { StagingPool } from '../pool/staging-pool';
import { startReplicaGauges } from './replica-gauges';
import { SchemaSource } from '../schema-registry/schema-source';
import { FileLocks } from '../staging/file-locks';
import { recoverStagingTables, recoverTableStaging } from '../staging/recovery';
import { tableStagingDir } from '../staging/table-staging';
import { NO_FAULTS, type Faults } from '../faults/faults';
import { replicaHooks } from '../faults/replica-hooks';
import { shareFaults } from '../faults/thread-faults';
import { kafkaLeaveGroup, PreviousMember } from '../kafka/previous-member';
import {
  checkDeclaredTypes,
  checkTableMode,
  checkTopicsExist,
  logCommittedOffsets,
  logJsonDecoder,
} from './startup-checks';
import { lanceTargetOf, tableColumns, tableKeyType } from '../lance/table-seeds';

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

/** What a started replica holds until its stop (Replica.stop orders their ends). */
interface ReplicaStages {
  readonly consumer: ResolvedConsumer;
  readonly owner: string;
  readonly logger: Logger;
  readonly admin: Admin;
  readonly ingestion: Ingestion;
  readonly deadLetters: DeadLetterSink;
  readonly failed: Promise<Error>;
  readonly materializer: MaterializerHost | undefined;
  /** Feeds the materializer the group's ownership (with the materializer only). */
  readonly ownershipFeed: OwnershipFeed | undefined;
  readonly gaugeTimer: NodeJS.Timeout;
  readonly dataDirLock: DataDirLock;
  readonly previousMember: PreviousMember;
}

/**
 * One replica of a consumer: the wiring of the stages and their order of start
 * and stop, in one place. Startup: read the group's committed offsets from the
 * broker, recover staging, start the materializer and the staging workers, then
 * subscribe. Stop: stop fetching, make durable, commit, seal, leave.
 */
export class Replica {
  readonly consumer: ResolvedConsumer;
  readonly owner: string;
  readonly #stages: ReplicaStages;

  private constructor(stages: ReplicaStages) {
    this.consumer = stages.consumer;
    this.owner = stages.owner;
    this.#stages = stages;
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
    chainBound(); // a test's lowered chain bound too small to hold two epochs stops the start here
    const owner = ulid();
    const log = logger.child({ consumer: consumer.name, owner });
    const lanceUri = lanceTargetOf(consumer).uri;
    log.info(
      {
        event: 'replica.start',
        groupId: consumer.groupId,
        topics: consumer.topics,
        topicPatterns: consumer.topicPatterns,
        table: consumer.table,
        dataDir: consumer.dataDir,
        brokers: consumer.brokers,
        client: redactedClient(consumer.client),
        // Option values that hold credentials never reach a log.
        lance: {
          uri: withoutUserInfo(lanceUri),
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
    // A routing consumer's tables are known only as records name them: each is checked
    // when it is first opened for publication, not here.
    const fixedTable = consumer.tableRouting.kind === 'fixed';
    // Also before Kafka: a declared field whose type changed stops the start, naming it.
    if (fixedTable && consumer.fields !== undefined) await checkDeclaredTypes(consumer, consumer.fields, log);
    // An upsert into an append table, or an append into an upsert table, stops the start.
    if (fixedTable) await checkTableMode(consumer, log);
    let reportFailure!: (error: Error) => void;
    const failed = new Promise<Error>((resolve) => (reportFailure = resolve));

    if (!RECORD_DECODER_INSTALLED) {
      log.warn(
        { event: 'kafka.recordDecoder.fallback' },
        "kafkajs's own record decoder is in use (the same records, more CPU per record)",
      );
    }
    if (!FAST_BATCH_INSTALLED) {
      log.warn(
        { event: 'kafka.consumerBatch.fallback' },
        "kafkajs's own consumer batches are in use (kafkajs was loaded before src/kafka/protocol/consumer-batch, or is not the release it reproduces: the same records, more CPU per record)",
      );
    }
    logJsonDecoder(consumer, log);
    const kafka = createKafka(consumer, log);
    const admin = kafka.admin();
    await admin.connect();
    await checkTopicsExist(admin, consumer);
    await logCommittedOffsets(admin, consumer, log);
    // Before this process joins: a member a crash left behind would hold its partitions for a session.
    const previousMember = new PreviousMember(consumer.dataDir, consumer.groupId, log);
    await previousMember.leaveIfLeftBehind(kafkaLeaveGroup(kafka));

    const tableDir = tableStagingDir(consumer.dataDir, consumer.table);
    if (faults.recoveryDelayMs > 0) await new Promise((r) => setTimeout(r, faults.recoveryDelayMs)); // test-only: a slow recovery
    // Every table directory a previous run staged, in fixed mode too: an earlier run may
    // have routed records, and the materializer serves every directory (torn parts first).
    const recovered = await recoverStagingTables(path.join(consumer.dataDir, 'staging'), {
      locks: new FileLocks(),
      owner: 'startup-recovery',
      logger: log,
    });
    if (fixedTable && !recovered.has(consumer.table)) {
      await recoverTableStaging({ tableDir, locks: new FileLocks(), owner: 'startup-recovery', logger: log });
    }

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
    // A routing consumer's lanes read each table's columns when they first see it.
    const knownFields = fixedTable ? await tableColumns(consumer, log) : [];
    const keyType = fixedTable ? await tableKeyType(consumer, log) : undefined;
    const diskPressure = new DiskPressure(log, metrics.diskFull);
    // Before the staging pool, whose sealed parts it takes: made in the order they report to each other.
    const materializer = consumer.materializer.enabled
      ? await MaterializerHost.start(
          materializerOptions(consumer, owner, store?.atomic ?? true, log.level),
          reportFailure,
          log,
          metrics,
          diskPressure,
        )
      : undefined;
    // The offset tracker hears from staging (each batch's dead letters) and decides the ingestion's commits.
    const tracker = new OffsetTracker();
    const stagedBatches = new StagedBatchReports(tracker, metrics, consumer.table);
    const { pool, ingestion } = await Replica.#startConsuming(
      () =>
        StagingPool.start({
          workers: consumer.workers,
          consumerPath: consumer.source,
          knownFields,
          ...(keyType === undefined ? {} : { tableKeyType: keyType }),
          brokers: consumer.brokers,
          tableDir,
          dataDir: consumer.dataDir,
          epoch: { owner, epoch: 0 },
          maxPartBytes: consumer.staging.maxPartBytes,
          maxPartAgeMs: consumer.staging.maxPartAgeMs,
          maxOpenParts: consumer.staging.maxOpenParts,
          maxQueueRecords: consumer.queue.maxRecords,
          maxQueueBytes: consumer.queue.maxBytes,
          logger: log,
          onBatchDone: (topic, partition, result) => {
            stagedBatches.onBatchDone(topic, partition, result);
            hooks.onBatchDone();
          },
          onFatal: reportFailure,
          // The catalog takes what the writers know instead of reading each part back.
          onSealed: (parts) => materializer?.sealed(parts),
        }),
      (pool) =>
        new Ingestion({
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
          tracker,
          deadLetters,
          owner,
          logger: log,
          initialEpoch: 0,
          metrics,
          tableDir,
          previousMember,
        }),
      reportFailure,
    ).catch(async (error: unknown) => {
      // A failed start leaves nothing running: the materializer thread would otherwise
      // keep the process (and the table's handle) alive beside the next start.
      await materializer?.stop(Date.now()).catch(() => undefined);
      throw error;
    });
    return new Replica({
      consumer,
      owner,
      logger: log,
      admin,
      ingestion,
      deadLetters,
      failed,
      materializer,
      ownershipFeed: materializer
        ? new OwnershipFeed(
            admin,
            consumer,
            (rows, sequence) => materializer.updateOwnership(rows, sequence),
            log,
          )
        : undefined,
      gaugeTimer: startReplicaGauges(pool, ingestion, admin, metrics, consumer.table),
      dataDirLock,
      previousMember,
    });
  }

  /** Starts the staging pool, then the ingestion on it; a failed ingestion start closes the pool. */
  static async #startConsuming(
    startPool: () => Promise<StagingPool>,
    ingestionOn: (pool: StagingPool) => Ingestion,
    reportFailure: (error: Error) => void,
  ): Promise<{ pool: StagingPool; ingestion: Ingestion }> {
    const pool = await startPool();
    try {
      const ingestion = ingestionOn(pool);
      await ingestion.start(reportFailure);
      return { pool, ingestion };
    } catch (error) {
      await pool.close().catch(() => undefined);
      throw error;
    }
  }

  /** Resolves with the error when the replica cannot go on (for example staging failed on disk). */
  get failed(): Promise<Error> {
    return this.#stages.failed;
  }

  get ready(): boolean {
    return this.#stages.ingestion.ready;
  }

  /**
   * Graceful stop: stop fetching, flush, commit, seal, leave the group; then publish what
   * was committed (the drain), starting no publication after `drainUntil` (epoch ms; the
   * caller's own deadline minus the time one publication may take). What a drain cannot
   * publish stays on the data directory, resolvable by any later start on it (DESIGN.md,
   * "Scale-down and old epochs").
   */
  async stop(drainUntil = Date.now() + DEFAULT_DRAIN_MS): Promise<void> {
    const s = this.#stages;
    s.logger.info({ event: 'replica.stop' }, 'stopping: stop fetching, flush, commit');
    clearInterval(s.gaugeTimer);
    await s.ingestion.stop();
    // The group was left: a start after this stop has no member to end.
    await s.previousMember.forget();
    // The planner sees the final commit before the drain (bounded by the deadline).
    await s.ownershipFeed?.stop(drainUntil);
    // Finish the running publication (never interrupt a Lance add), then drain.
    await s.materializer?.stop(drainUntil);
    await s.deadLetters.close();
    await s.admin.disconnect();
    await s.dataDirLock.release();
    s.logger.info({ event: 'replica.stopped', ...s.ingestion.stats }, 'replica stopped');
  }
}

/** How long a stop without a deadline of its own keeps starting publications. */
const DEFAULT_DRAIN_MS = 15_000;

async function openDeadLetterSink(consumer: ResolvedConsumer, producer: Producer): Promise<DeadLetterSink> {
  const target = consumer.deadLetter;
  if (target && 'topic' in target) {
    await producer.connect();
    return new KafkaDeadLetterSink(
      producer,
      target.topic,
      consumer.name,
      target.contextHeaders,
      compressionType(target.compression),
    );
  }
  const file = target?.file ?? path.join(consumer.dataDir, 'dead-letter', `${consumer.name}.jsonl`);
  return new FileDeadLetterSink(path.resolve(file));
}

/**
 * The materializer's options, from the consumer's definition and what the start learned:
 * it serves every table under `<dataDir>/staging`, each in the Lance database of the
 * definition, under its directory's name.
 */
function materializerOptions(
  consumer: ResolvedConsumer,
  owner: string,
  storeAtomic: boolean,
  logLevel: string,
): MaterializerWorkerInit {
  const m = consumer.materializer;
  const { table: _fixed, ...lance } = lanceTargetOf(consumer);
  return {
    stagingRoot: path.join(consumer.dataDir, 'staging'),
    // A routing definition stalls one damaged table and goes on with the others (table-set.ts).
    fixedTable: consumer.tableRouting.kind === 'fixed' ? consumer.table : undefined,
    lance,
    expectations: { fields: consumer.fields, epochUnit: consumer.epochUnit, upsertKey: consumer.upsertKey },
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
    storeAtomic,
    commitAfter: consumer.offsets.commitAfter,
    upsertKey: consumer.upsertKey,
    toastPlaceholders: consumer.envelope === 'debezium',
    maxTableLabels: consumer.metrics.maxTableLabels,
    logLevel,
  };
}
