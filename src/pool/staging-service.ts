/**
 * What a staging lane does with each request: decodes a batch of the partitions routed
 * to it and stages it in its own TableStaging (its own part files in the table's staging
 * directory; a routing consumer's records in the TableStaging of each one's table,
 * staging-tables.ts), and answers syncs, flushes, epoch changes and the close. The same service
 * runs inside a worker thread (staging-worker.ts) or on the main thread
 * (in-thread-lane.ts); its caller hands it one request at a time, in arrival order, so a
 * batch's reply always comes before the reply of a later sync that covers it.
 */
import { DiskFullError, errorMessage } from '../common/errors';
import { createLogger, type Logger } from '../common/logger';
import { parseTpKey, recordOffset, type DurableOffset, type TopicPartitionKey } from '../common/offsets';
import { loadConsumer } from '../config/load';
import { TableResolver, type RouteRecord } from '../config/table-routing';
import type { DeadLetterVerdict } from '../dead-letters/dead-letter-reason';
import type { RawMessage } from '../decode/raw-message';
import { RecordDecoder } from '../decode/record-decoder';
import type { StagingEpoch } from '../staging/epoch';
import { FileLocks } from '../staging/file-locks';
import { StagingFailedError, TableStaging, type FlushResult } from '../staging/table-staging';
import { StagingTables } from './staging-tables';
import { unpackMessages, type PackedMessages } from './packed-messages';
import type { BatchRecords, StagingWorkerInit, TableStaged, WorkerReply, WorkerRequest } from './protocol';

export class StagingService {
  private constructor(
    /** A fixed table (today's layout); undefined for a routing consumer. */
    private readonly fixed: { readonly decoder: RecordDecoder; readonly staging: TableStaging } | undefined,
    /** A routing consumer's tables, opened on first sight; undefined for a fixed table. */
    private readonly routed: { readonly tables: StagingTables; readonly resolver: TableResolver } | undefined,
    private readonly logger: Logger,
  ) {}

  /** `name` names the lane in logs and file locks: a worker thread's, or the main thread's. */
  static async open(init: StagingWorkerInit, name: string): Promise<StagingService> {
    const logger = createLogger({ level: init.logLevel as 'info', name });
    const consumer = loadConsumer(init.consumerPath, process.env, {
      brokers: init.brokers,
      ...(init.dataDir === undefined ? {} : { dataDir: init.dataDir }),
    });
    if (consumer.tableRouting.kind !== 'fixed') {
      if (init.dataDir === undefined) throw new Error("a routing consumer's staging lane needs its dataDir");
      const tables = new StagingTables({
        consumer,
        dataDir: init.dataDir,
        owner: name,
        logger,
        epoch: init.epoch,
        maxPartBytes: init.maxPartBytes,
        maxPartAgeMs: init.maxPartAgeMs,
        maxOpenParts: init.maxOpenParts,
        // Loaded on the first routed table: LanceDB costs every worker tens of MB otherwise.
        seedsOf: async (table) => (await import('../lance/table-seeds')).tableSeeds(consumer, table, logger),
      });
      const resolver = new TableResolver(consumer.tableRouting, consumer.table, consumer.route);
      return new StagingService(undefined, { tables, resolver }, logger);
    }
    const decoder = new RecordDecoder({
      ...consumer,
      knownFields: init.knownFields,
      ...(init.tableKeyType === undefined ? {} : { tableKeyType: init.tableKeyType }),
    });
    const staging = await TableStaging.open({
      tableDir: init.tableDir,
      table: consumer.table,
      locks: new FileLocks(),
      owner: name,
      logger,
      maxPartBytes: init.maxPartBytes,
      maxPartAgeMs: init.maxPartAgeMs,
      maxOpenParts: init.maxOpenParts,
      epoch: init.epoch,
    });
    return new StagingService({ decoder, staging }, undefined, logger);
  }

  /** The reply to one request; a failure is an `error` reply, never a rejection. */
  async handle(request: WorkerRequest): Promise<WorkerReply> {
    try {
      return this.fixed
        ? await this.#handle(request, this.fixed)
        : await this.#handleRouted(request, this.routed!);
    } catch (error) {
      if (error instanceof DiskFullError) {
        // Not a failure of staging: the main thread pauses and retries (kafka/durability-tick.ts).
        return {
          type: 'error',
          id: request.id,
          message: errorMessage(error),
          fatal: false,
          diskFull: { path: error.path, operation: error.operation },
        };
      }
      this.logger.error(
        { event: 'staging-worker.error', request: request.type, err: error },
        errorMessage(error),
      );
      return {
        type: 'error',
        id: request.id,
        message: errorMessage(error),
        fatal: error instanceof StagingFailedError,
      };
    }
  }

  async #handle(
    request: WorkerRequest,
    fixed: { readonly decoder: RecordDecoder; readonly staging: TableStaging },
  ): Promise<WorkerReply> {
    const staging = fixed.staging;
    switch (request.type) {
      case 'batch':
        return { type: 'batch', id: request.id, result: this.#stageBatch(request, fixed) };
      case 'sync': {
        const durable = await staging.sync();
        const stats = staging.stats();
        return syncReply(request.id, staging.epoch.epoch, stats, staging.unsealedPartIds(), durable);
      }
      case 'flush':
        return {
          type: 'flush',
          id: request.id,
          sealed: summary(await staging.flush({ force: request.force })),
        };
      case 'epoch': {
        for (const [topic, partition, ceiling] of request.revoked) {
          staging.lowerHighWater(topic, partition, ceiling as DurableOffset);
        }
        for (const [topic, partition, offset] of request.assigned) {
          staging.lowerHighWater(topic, partition, offset as DurableOffset);
          staging.raiseHighWater(topic, partition, offset as DurableOffset);
        }
        return { type: 'epoch', id: request.id, sealed: summary(await staging.beginEpoch(request.epoch)) };
      }
      case 'close':
        return { type: 'close', id: request.id, sealed: summary(await staging.close()) };
    }
  }

  async #handleRouted(
    request: WorkerRequest,
    routed: { readonly tables: StagingTables; readonly resolver: TableResolver },
  ): Promise<WorkerReply> {
    const tables = routed.tables;
    switch (request.type) {
      case 'batch':
        return { type: 'batch', id: request.id, result: await this.#stageRouted(request, routed) };
      case 'sync': {
        const durable = await tables.sync();
        const stats = tables.stats();
        return syncReply(request.id, tables.epoch.epoch, stats, tables.unsealedPartIds(), durable);
      }
      case 'flush':
        return { type: 'flush', id: request.id, sealed: summary(await tables.flush(request.force)) };
      case 'epoch':
        return {
          type: 'epoch',
          id: request.id,
          sealed: summary(await tables.beginEpoch(request.epoch, request.revoked, request.assigned)),
        };
      case 'close':
        return { type: 'close', id: request.id, sealed: summary(await tables.close()) };
    }
  }

  #stageBatch(
    request: Extract<WorkerRequest, { type: 'batch' }>,
    fixed: { readonly decoder: RecordDecoder; readonly staging: TableStaging },
  ) {
    const staging = fixed.staging;
    if (request.epoch !== staging.epoch.epoch) {
      // Admitted before a join that began a newer epoch: its offsets follow the
      // old claim's fetch position, so staging it could leave a gap below it.
      return { dropped: true, staged: 0, skipped: 0, deadLetters: [], stagedBytes: 0 };
    }
    return stageInto(fixed, request, messagesOf(request.records), staging.epoch);
  }

  /**
   * A routing consumer's batch: each record's table is decided before it is decoded; each
   * table decodes and stages its own records, and every table that has seen the partition
   * takes the batch's last offset (so none holds the partition's commit back). A record
   * with no valid table is a dead letter (invalid-table).
   */
  async #stageRouted(
    request: Extract<WorkerRequest, { type: 'batch' }>,
    routed: { readonly tables: StagingTables; readonly resolver: TableResolver },
  ) {
    const { tables, resolver } = routed;
    if (request.epoch !== tables.epoch.epoch) {
      return { dropped: true, staged: 0, skipped: 0, deadLetters: [], stagedBytes: 0 };
    }
    // Redeliveries are dropped before routing: routed again, a record could land in a
    // second table (the tables' own thresholds skip only what each of them was given).
    const handled = tables.handledThrough(request.topic, request.partition) ?? -1;
    const all = messagesOf(request.records);
    const fresh = all.filter((m) => m.offsetNumber > handled);
    const { byTable, deadLetters } = routeMessages(resolver, request.topic, request.partition, fresh);
    // A route gone wrong (an id as the table name) must not make a directory per record.
    for (const table of tables.beyondBound(byTable.keys())) {
      for (const m of byTable.get(table)!) {
        const detail = `too many tables: "${table}" would be one more than staging.maxTables (${tables.maxTables}) in this staging lane`;
        deadLetters.push({ offset: m.offsetNumber, reason: 'invalid-table', detail });
      }
      byTable.delete(table);
    }
    for (const table of byTable.keys()) await tables.open(table);
    // Opening a table may have waited (its seeds are read from Lance): a join meanwhile began a newer epoch.
    if (request.epoch !== tables.epoch.epoch) {
      return { dropped: true, staged: 0, skipped: 0, deadLetters: [], stagedBytes: 0 };
    }
    const durability = tables.durability;
    for (const table of byTable.keys()) durability.saw(request.topic, request.partition, table);
    const following = durability.tablesOf(request.topic, request.partition);
    if (following.size === 0) {
      durability.handledWithoutTable(request.topic, request.partition, request.through as DurableOffset);
    }
    let staged = 0;
    let skipped = all.length - fresh.length;
    let stagedBytes = 0;
    const perTable: TableStaged[] = [];
    for (const table of following) {
      const result = stageInto(tables.get(table)!, request, byTable.get(table) ?? [], tables.epoch);
      staged += result.staged;
      skipped += result.skipped;
      stagedBytes += result.stagedBytes;
      deadLetters.push(...result.deadLetters);
      if (result.staged > 0) perTable.push({ table, staged: result.staged, stagedBytes: result.stagedBytes });
    }
    tables.handled(request.topic, request.partition, request.through as DurableOffset);
    deadLetters.sort((a, b) => a.offset - b.offset);
    return { dropped: false, staged, skipped, deadLetters, stagedBytes, byTable: perTable };
  }
}

/**
 * Decodes a batch's messages for one table and stages them, with the batch's last offset
 * as handled (a table given no message of the batch takes that offset only).
 */
function stageInto(
  table: { readonly decoder: RecordDecoder; readonly staging: TableStaging },
  request: Extract<WorkerRequest, { type: 'batch' }>,
  messages: readonly RawMessage[],
  epoch: StagingEpoch,
) {
  const staging = table.staging;
  const decoded =
    messages.length > 0
      ? table.decoder.decode(
          request.topic,
          request.partition,
          messages,
          epoch.topicIds?.[request.topic] ?? '',
          request.schemas,
        )
      : { batch: undefined, minute: [], earlier: [], deadLetters: [] };
  // Rows decoded before a column was retyped: their own schema, so their own parts.
  // Each push hands over only through its own last record, so the high-water never
  // passes rows still to be pushed.
  let staged = 0;
  let skipped = 0;
  let stagedBytes = decoded.batch?.data.byteLength ?? 0;
  for (const segment of decoded.earlier) {
    const pushed = staging.push({
      topic: request.topic,
      partition: request.partition,
      batch: segment.batch,
      minute: segment.minute,
      handledThrough: recordOffset(segment.through),
    });
    staged += pushed.staged;
    skipped += pushed.skipped;
    stagedBytes += segment.batch.data.byteLength;
  }
  const pushed = staging.push({
    topic: request.topic,
    partition: request.partition,
    batch: decoded.batch,
    minute: decoded.minute,
    handledThrough: recordOffset(request.through),
  });
  return {
    dropped: false,
    staged: staged + pushed.staged,
    skipped: skipped + pushed.skipped,
    deadLetters: decoded.deadLetters,
    stagedBytes,
  };
}

/** A batch's messages by table, in offset order within each; those with no valid table as dead letters. */
export function routeMessages(
  resolver: TableResolver,
  topic: string,
  partition: number,
  messages: readonly RawMessage[],
): { byTable: Map<string, RawMessage[]>; deadLetters: DeadLetterVerdict[] } {
  const byTable = new Map<string, RawMessage[]>();
  const deadLetters: DeadLetterVerdict[] = [];
  const whole = resolver.tableOfTopic(topic);
  if (whole && 'table' in whole) {
    if (messages.length > 0) byTable.set(whole.table, [...messages]);
    return { byTable, deadLetters };
  }
  for (const message of messages) {
    const choice = whole ?? resolver.tableOf(routeRecord(topic, partition, message));
    if ('problem' in choice) {
      deadLetters.push({ offset: message.offsetNumber, reason: 'invalid-table', detail: choice.problem });
      continue;
    }
    let list = byTable.get(choice.table);
    if (!list) byTable.set(choice.table, (list = []));
    list.push(message);
  }
  return { byTable, deadLetters };
}

function routeRecord(topic: string, partition: number, message: RawMessage): RouteRecord {
  return {
    topic,
    partition,
    offset: message.offsetNumber,
    timestamp: message.timestampNumber,
    key: asBuffer(message.key),
    value: asBuffer(message.value),
  };
}

/**
 * A copy, as `transform` is given: on the main-thread lane the bytes are views into
 * kafkajs's fetch buffers, which a route could keep or write into.
 */
function asBuffer(bytes: Uint8Array | null): Buffer | null {
  return bytes === null ? null : Buffer.from(bytes);
}

function syncReply(
  id: number,
  epoch: number,
  stats: { readonly openParts: number; readonly sealingParts: number },
  unsealed: string[],
  durable: ReadonlyMap<TopicPartitionKey, DurableOffset>,
): WorkerReply {
  return {
    type: 'sync',
    id,
    epoch,
    parts: { open: stats.openParts, sealing: stats.sealingParts },
    unsealed,
    durable: [...durable].map(([key, offset]) => {
      const { topic, partition } = parseTpKey(key);
      return [topic, partition, offset] as const;
    }),
  };
}

function messagesOf(records: BatchRecords): readonly RawMessage[] {
  return isPacked(records) ? unpackMessages(records) : records;
}

function isPacked(records: BatchRecords): records is PackedMessages {
  return !Array.isArray(records);
}

function summary(r: FlushResult) {
  return {
    parts: r.sealed.length,
    rows: r.sealed.reduce((n, p) => n + p.rows, 0),
    bytes: r.sealed.reduce((n, p) => n + p.bytes, 0),
    sealed: r.sealed,
  };
}
