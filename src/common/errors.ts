/**
 * One base class for every error kafka-lance raises on purpose. Callers branch on
 * `code` (a closed union), never on message text; `retriable` says whether the
 * same operation may succeed if tried again unchanged.
 */
export type ErrorCode =
  | 'CONFIG_INVALID'
  | 'FILE_LOCK_CONFLICT'
  | 'PART_CORRUPT'
  | 'PART_SCHEMA_MISMATCH'
  | 'STAGING_CLOSED'
  | 'STAGING_FAILED'
  | 'STAGING_OFFSET_ORDER'
  | 'STAGING_WORKER_FAILED'
  | 'DATA_DIR_LOCKED'
  | 'LANCE_WRITE_FAILED'
  | 'LANCE_SCHEMA_INCOMPATIBLE'
  | 'PUBLICATION_MISMATCH'
  | 'PUBLICATION_PARTIAL'
  | 'PUBLICATION_SOURCE_MISSING'
  | 'MATERIALIZER_FAILED'
  | 'DEAD_LETTER_WRITE_FAILED'
  | 'PARTITION_STOPPED'
  | 'BATCH_CORRUPT'
  | 'DISK_FULL'
  | 'TOPIC_NOT_SERVED'
  | 'TABLE_REFUSED'
  | 'SCHEMA_REGISTRY_UNAVAILABLE';

export interface KafkaLanceErrorOptions {
  readonly retriable?: boolean;
  readonly cause?: unknown;
  /** Facts a user needs to act on the error (paths, partitions, offsets). */
  readonly context?: Readonly<Record<string, unknown>>;
}

export class KafkaLanceError extends Error {
  readonly code: ErrorCode;
  readonly retriable: boolean;
  readonly context: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, message: string, options: KafkaLanceErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retriable = options.retriable ?? false;
    this.context = options.context ?? {};
  }
}

/** A file lock was asked for a path that another task already holds. */
export class FileLockConflictError extends KafkaLanceError {
  constructor(
    readonly path: string,
    readonly holder: string,
    readonly requester: string,
  ) {
    super('FILE_LOCK_CONFLICT', `${path} is locked by ${holder}; ${requester} may not work on it`, {
      retriable: true,
      context: { path, holder, requester },
    });
  }
}

/** A staged Arrow IPC part cannot be read as whole batches. */
export class PartCorruptError extends KafkaLanceError {
  constructor(
    readonly path: string,
    reason: string,
    cause?: unknown,
  ) {
    super('PART_CORRUPT', `staging part ${path} is corrupt: ${reason}`, { cause, context: { path, reason } });
  }
}

export class StagingClosedError extends KafkaLanceError {
  constructor(readonly table: string) {
    super('STAGING_CLOSED', `staging for table ${table} is closed`, { context: { table } });
  }
}

/** Staging was handed offsets of one partition out of order: a bug upstream, never data to keep. */
export class OffsetOrderError extends KafkaLanceError {
  constructor(topic: string, partition: number, previous: number, next: number) {
    super(
      'STAGING_OFFSET_ORDER',
      `offsets of ${topic}[${partition}] went backwards in one push: ${next} after ${previous}`,
      { context: { topic, partition, previous, next } },
    );
  }
}

/**
 * A dead-letter sink could not make letters durable. Classified once, at the sink
 * boundary: `retriable` false means the same write can never succeed (too large for
 * the topic, no such topic, no permission), so retrying only pins memory.
 */
export class DeadLetterWriteError extends KafkaLanceError {
  constructor(
    readonly sink: string,
    /** What went wrong, without the sink (for reports that name it already). */
    readonly detail: string,
    options: { readonly retriable: boolean; readonly cause: unknown },
  ) {
    super('DEAD_LETTER_WRITE_FAILED', `dead-letter ${sink}: ${detail}`, {
      retriable: options.retriable,
      cause: options.cause,
      context: { sink },
    });
  }
}

/**
 * This replica stopped consuming one partition: records from `offset` on are neither
 * staged for commit nor dead-lettered, so they stay uncommitted (nothing is lost; a
 * restart tries again). Not retriable in this process.
 */
export class PartitionStoppedError extends KafkaLanceError {
  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly offset: number,
    readonly reason: PartitionStopReason,
    message: string,
    cause?: unknown,
  ) {
    super('PARTITION_STOPPED', `stopped consuming ${topic}[${partition}] at offset ${offset}: ${message}`, {
      cause,
      context: { topic, partition, offset, reason },
    });
  }
}

/** Why a partition was stopped (the `reason` label of kafka_lance_partition_stopped). */
export type PartitionStopReason =
  'dead-letter-write-failed' | 'dead-letter-ratio-exceeded' | 'corrupt-record-batch';

/** Where kafka-lance writes: the staging directory (parts, plans, ledger) or the Lance table. */
export type DiskStage = 'staging' | 'lance';

/**
 * A write found its file system full (ENOSPC) or its quota spent (EDQUOT). Retriable by
 * definition: nothing about the data is wrong, and the same write succeeds once space
 * returns. Never a reason to set data aside (see materializer/failure.ts).
 */
export class DiskFullError extends KafkaLanceError {
  constructor(
    readonly stage: DiskStage,
    readonly path: string,
    /** What was being done: `write`, `open`, `add`, ... */
    readonly operation: string,
    cause?: unknown,
  ) {
    super('DISK_FULL', `${stage} disk full: ${operation} ${path}: ${errorMessage(cause)}`, {
      retriable: true,
      cause,
      context: { stage, path, operation },
    });
  }
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
