import {
  KafkaJSError,
  KafkaJSGroupCoordinatorNotFound,
  KafkaJSNonRetriableError,
  type Admin,
  type Consumer,
  type ConsumerConfig,
  type Kafka,
} from 'kafkajs';
import type { Logger } from '../common/logger';
import type { Faults, LoopBlock } from './faults';

/**
 * The faults that fire on the replica's main thread, built from its parsed Faults
 * (src/faults/faults.ts) and wired in src/replica/replica.ts. With no such fault every
 * function here returns its input unchanged (or nothing).
 *
 * - blockLoopAt: when the staging pool reports the given staged batch, busy-wait the
 *   main thread (once per pair): kafkajs can send no heartbeat and fire no timer
 *   meanwhile, as in a long GC pause or a CPU-bound bug. Logs `test.block-loop` before
 *   and `test.block-loop.end` after.
 * - blockLoopOnSignalMs: each SIGUSR2 arms one block at the next staged batch (so that
 *   a test decides when, and repeats it), logged the same way.
 * - failFirstClaim: the first claim of the process fails once: `fetch` makes the
 *   ingestion's first `admin.fetchOffsets` (its claim reads the chains) throw; `commit`
 *   makes the consumer's first `commitOffsets` (the claim commit: no data commit can
 *   precede a claim) be refused. Logs `test.fail-claim`.
 * - loseCoordinatorAt: the nth batch kafkajs hands to eachBatch throws, before the
 *   ingestion sees it, the error kafkajs's coordinator lookup ends in when no broker
 *   answers (retry/index.js wraps it in a non-retriable error naming it as its cause).
 *   kafkajs crashes its consumer without restarting it, as after the broker restart in
 *   which this was found. Logs `test.lose-coordinator`.
 */
export interface ReplicaHooks {
  /** Called for every staged batch the pool reports (main thread). */
  readonly onBatchDone: () => void;
  /** The admin client the ingestion gets. */
  readonly admin: (admin: Admin) => Admin;
  /** The Kafka client the ingestion gets. */
  readonly kafka: (kafka: Kafka) => Kafka;
}

export function replicaHooks(faults: Faults, logger: Logger): ReplicaHooks {
  return {
    onBatchDone: loopBlocker(faults.blockLoopAt, faults.blockLoopOnSignalMs, logger),
    admin: (admin) => (faults.failFirstClaim === 'fetch' ? failFirstFetch(admin, logger) : admin),
    kafka: (kafka) => {
      const claims = faults.failFirstClaim === 'commit' ? failFirstCommit(kafka, logger) : kafka;
      return faults.loseCoordinatorAt === undefined
        ? claims
        : loseCoordinator(claims, faults.loseCoordinatorAt, logger);
    },
  };
}

function loopBlocker(at: readonly LoopBlock[], onSignalMs: number | undefined, logger: Logger): () => void {
  const blocks = new Map(at.map((block) => [block.batch, block.ms]));
  let armed: number | undefined;
  if (onSignalMs !== undefined) {
    process.on('SIGUSR2', () => {
      armed = onSignalMs;
      logger.warn(
        { event: 'test.block-loop.armed', ms: onSignalMs },
        'test hook: blocking at the next staged batch',
      );
    });
  }
  if (blocks.size === 0 && onSignalMs === undefined) return () => undefined;
  let batches = 0;
  return () => {
    batches += 1;
    const ms = blocks.get(batches) ?? armed;
    if (ms === undefined) return;
    armed = undefined;
    logger.warn({ event: 'test.block-loop', batch: batches, ms }, 'test hook: blocking the event loop');
    const until = Date.now() + ms;
    while (Date.now() < until) {
      // busy-wait: nothing else runs on this thread meanwhile
    }
    logger.warn({ event: 'test.block-loop.end', batch: batches, ms }, 'test hook: event loop unblocked');
  };
}

function failFirstFetch(admin: Admin, logger: Logger): Admin {
  let failed = false;
  const fetchOffsets: Admin['fetchOffsets'] = (options) => {
    if (!failed) {
      failed = true;
      logger.warn({ event: 'test.fail-claim', step: 'fetch' }, 'test hook: failing the first claim');
      return Promise.reject(
        new KafkaJSError('test hook: fetchOffsets failed (KAFKA_LANCE_TEST_FAIL_FIRST_CLAIM=fetch)', {
          retriable: true,
        }),
      );
    }
    return admin.fetchOffsets(options);
  };
  return new Proxy(admin, {
    get: (target, prop, receiver) =>
      prop === 'fetchOffsets' ? fetchOffsets : (Reflect.get(target, prop, receiver) as unknown),
  });
}

function failFirstCommit(kafka: Kafka, logger: Logger): Kafka {
  return withConsumers(kafka, (real) => {
    let failed = false;
    const commitOffsets: Consumer['commitOffsets'] = (offsets) => {
      if (!failed) {
        failed = true;
        logger.warn(
          { event: 'test.fail-claim', step: 'commit' },
          'test hook: refusing the first claim commit',
        );
        return Promise.reject(
          new KafkaJSError('test hook: commit refused (KAFKA_LANCE_TEST_FAIL_FIRST_CLAIM=commit)', {
            retriable: true,
          }),
        );
      }
      return real.commitOffsets(offsets);
    };
    return { ...real, commitOffsets };
  });
}

function loseCoordinator(kafka: Kafka, at: number, logger: Logger): Kafka {
  let batches = 0;
  return withConsumers(kafka, (real) => {
    const run: Consumer['run'] = (options) =>
      real.run({
        ...options,
        eachBatch: async (payload) => {
          batches += 1;
          if (batches === at) {
            logger.warn(
              { event: 'test.lose-coordinator', batch: batches },
              'test hook: losing the coordinator',
            );
            throw coordinatorLookupFailure();
          }
          await options?.eachBatch?.(payload);
        },
      });
    return { ...real, run };
  });
}

/**
 * What a consumer's coordinator lookup ends in when no broker answered it: kafkajs's
 * retrier (retry/index.js) wraps KafkaJSGroupCoordinatorNotFound in a non-retriable error
 * naming it as its cause. kafkajs's typings leave out the constructors' arguments its
 * source takes.
 */
export function coordinatorLookupFailure(): Error {
  const lookup = new (KafkaJSGroupCoordinatorNotFound as unknown as new (m: string) => Error)(
    'Failed to find group coordinator',
  );
  return new (KafkaJSNonRetriableError as unknown as new (e: Error, o: { cause: Error }) => Error)(lookup, {
    cause: lookup,
  });
}

/** `kafka`, whose consumers are those it makes, as `wrap` changes them. */
function withConsumers(kafka: Kafka, wrap: (real: Consumer) => Consumer): Kafka {
  const consumer = (config: ConsumerConfig): Consumer => wrap(kafka.consumer(config));
  return new Proxy(kafka, {
    get: (target, prop, receiver) =>
      prop === 'consumer' ? consumer : (Reflect.get(target, prop, receiver) as unknown),
  });
}
