/**
 * What a staging lane does with each request: decodes a batch of the partitions routed
 * to it and stages it in its own TableStaging (its own part files in the table's staging
 * directory), and answers syncs, flushes, epoch changes and the close. The same service
 * runs inside a worker thread (staging-worker.ts) or on the main thread
 * (in-thread-lane.ts); its caller hands it one request at a time, in arrival order, so a
 * batch's reply always comes before the reply of a later sync that covers it.
 */
import { DiskFullError, errorMessage } from '../common/errors';
import { createLogger, type Logger } from '../common/logger';
import { parseTpKey, recordOffset, type DurableOffset } from '../common/offsets';
import { loadConsumer } from '../config/load';
import type { RawMessage } from '../decode/raw-message';
import { RecordDecoder } from '../decode/record-decoder';
import { FileLocks } from '../staging/file-locks';
import { StagingFailedError, TableStaging, type FlushResult } from '../staging/table-staging';
import { unpackMessages, type PackedMessages } from './packed-messages';
import type { BatchRecords, StagingWorkerInit, WorkerReply, WorkerRequest } from './protocol';

export class StagingService {
  private constructor(
    private readonly decoder: RecordDecoder,
    private readonly staging: TableStaging,
    private readonly logger: Logger,
  ) {}

  /** `name` names the lane in logs and file locks: a worker thread's, or the main thread's. */
  static async open(init: StagingWorkerInit, name: string): Promise<StagingService> {
    const logger = createLogger({ level: init.logLevel as 'info', name });
    const consumer = loadConsumer(init.consumerPath, process.env, { brokers: init.brokers });
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
    return new StagingService(decoder, staging, logger);
  }

  /** The reply to one request; a failure is an `error` reply, never a rejection. */
  async handle(request: WorkerRequest): Promise<WorkerReply> {
    try {
      return await this.#handle(request);
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

  async #handle(request: WorkerRequest): Promise<WorkerReply> {
    const staging = this.staging;
    switch (request.type) {
      case 'batch':
        return { type: 'batch', id: request.id, result: this.#stageBatch(request) };
      case 'sync': {
        const durable = await staging.sync();
        const stats = staging.stats();
        return {
          type: 'sync',
          id: request.id,
          epoch: staging.epoch.epoch,
          parts: { open: stats.openParts, sealing: stats.sealingParts },
          unsealed: staging.unsealedPartIds(),
          durable: [...durable].map(([key, offset]) => {
            const { topic, partition } = parseTpKey(key);
            return [topic, partition, offset] as const;
          }),
        };
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

  #stageBatch(request: Extract<WorkerRequest, { type: 'batch' }>) {
    const staging = this.staging;
    if (request.epoch !== staging.epoch.epoch) {
      // Admitted before a join that began a newer epoch: its offsets follow the
      // old claim's fetch position, so staging it could leave a gap below it.
      return { dropped: true, staged: 0, skipped: 0, deadLetters: [], stagedBytes: 0 };
    }
    const messages = messagesOf(request.records);
    const decoded =
      messages.length > 0
        ? this.decoder.decode(
            request.topic,
            request.partition,
            messages,
            staging.epoch.topicIds?.[request.topic] ?? '',
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
