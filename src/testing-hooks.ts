import { KafkaJSError, type Admin, type Consumer, type ConsumerConfig, type Kafka } from 'kafkajs';
import type { Logger } from './common/logger';

/**
 * Test-only fault injection, switched on by KAFKA_LANCE_TEST_* environment variables
 * and wired in src/replica.ts. Without those variables every function here returns
 * its input unchanged (or nothing), so production runs never reach a fault.
 *
 * - KAFKA_LANCE_TEST_BLOCK_LOOP_AT=<n>:<ms>[,<n>:<ms>...] — when the staging pool
 *   reports its n-th staged batch, busy-wait the main thread for <ms> (once per
 *   pair): kafkajs can send no heartbeat and fire no timer meanwhile, as in a long GC
 *   pause or a CPU-bound bug. Logs `test.block-loop` before and
 *   `test.block-loop.end` after.
 * - KAFKA_LANCE_TEST_BLOCK_LOOP_ON_SIGNAL=<ms> — each SIGUSR2 arms one block of <ms>
 *   at the next staged batch (so that a test decides when, and repeats it), logged
 *   the same way.
 * - KAFKA_LANCE_TEST_FAIL_FIRST_CLAIM=fetch|commit — the first claim of the process
 *   fails once: `fetch` makes the ingestion's first `admin.fetchOffsets` (its claim
 *   reads the chains) throw; `commit` makes the consumer's first `commitOffsets` (the
 *   claim commit: no data commit can precede a claim) be refused. Logs
 *   `test.fail-claim`.
 * - KAFKA_LANCE_TEST_MAX_CHAIN_BYTES=<n> — the ownership chain's bound in bytes (default
 *   3,800, about 85 entries): a test lowers it so that a few rebalances drop an epoch
 *   from the chain. Read by src/ownership/chain.ts itself, in every thread (the planner
 *   runs in the materializer's worker), not wired here.
 */
export interface TestHooks {
  /** Called for every staged batch the pool reports (main thread). */
  readonly onBatchDone: () => void;
  /** The admin client the ingestion gets. */
  readonly admin: (admin: Admin) => Admin;
  /** The Kafka client the ingestion gets. */
  readonly kafka: (kafka: Kafka) => Kafka;
}

export function testHooks(env: NodeJS.ProcessEnv, logger: Logger): TestHooks {
  return {
    onBatchDone: loopBlocker(
      env.KAFKA_LANCE_TEST_BLOCK_LOOP_AT,
      env.KAFKA_LANCE_TEST_BLOCK_LOOP_ON_SIGNAL,
      logger,
    ),
    admin: (admin) =>
      env.KAFKA_LANCE_TEST_FAIL_FIRST_CLAIM === 'fetch' ? failFirstFetch(admin, logger) : admin,
    kafka: (kafka) =>
      env.KAFKA_LANCE_TEST_FAIL_FIRST_CLAIM === 'commit' ? failFirstCommit(kafka, logger) : kafka,
  };
}

function loopBlocker(spec: string | undefined, onSignal: string | undefined, logger: Logger): () => void {
  const blocks = new Map<number, number>();
  for (const pair of spec ? spec.split(',') : []) {
    const match = /^(\d+):(\d+)$/.exec(pair.trim());
    if (!match) throw new Error(`KAFKA_LANCE_TEST_BLOCK_LOOP_AT must be <n>:<ms>[,<n>:<ms>...], not ${spec}`);
    blocks.set(Number(match[1]), Number(match[2]));
  }
  let armed: number | undefined;
  if (onSignal) {
    const ms = Number(onSignal);
    if (!Number.isSafeInteger(ms) || ms <= 0)
      throw new Error(`KAFKA_LANCE_TEST_BLOCK_LOOP_ON_SIGNAL must be a number of ms, not ${onSignal}`);
    process.on('SIGUSR2', () => {
      armed = ms;
      logger.warn({ event: 'test.block-loop.armed', ms }, 'test hook: blocking at the next staged batch');
    });
  }
  if (blocks.size === 0 && !onSignal) return () => undefined;
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
  const consumer = (config: ConsumerConfig): Consumer => {
    const real = kafka.consumer(config);
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
  };
  return new Proxy(kafka, {
    get: (target, prop, receiver) =>
      prop === 'consumer' ? consumer : (Reflect.get(target, prop, receiver) as unknown),
  });
}
