import { KafkaLanceError, type DiskStage } from '../common/errors';

/**
 * The test-only faults a replica process can be started with, read from its
 * KAFKA_LANCE_TEST_* environment variables once, at process start (the CLI's run
 * command; a test's own child process), and validated there: a bad value stops the
 * start naming its variable instead of silently injecting nothing. Outside tests no
 * variable is set and every fault is absent, so production runs never reach one.
 *
 * Where each fault fires:
 * - crashAt / stopAt: src/faults/crash-points.ts (materializer worker thread);
 * - killAtCommit: src/faults/crash-points.ts (main thread, the offset committer);
 * - diskFull: src/faults/disk-full.ts (staging workers, materializer worker);
 * - recoveryDelayMs: src/replica/replica.ts;
 * - blockLoop*, failFirstClaim, loseCoordinatorAt: src/faults/replica-hooks.ts (main thread).
 * - maxChainBytes: src/ownership/chain.ts (main thread, where claims append epochs).
 */
export interface Faults {
  /** KAFKA_LANCE_TEST_CRASH_AT=<point>: SIGKILL the process at that crash point. */
  readonly crashAt?: CrashPointName;
  /**
   * KAFKA_LANCE_TEST_STOP_AT=<point>: SIGSTOP the process the first time it reaches
   * that point (a zombie frozen inside a publication); the test SIGCONTs it.
   */
  readonly stopAt?: CrashPointName;
  /** KAFKA_LANCE_TEST_KILL_AT_COMMIT=<n>: SIGKILL when the nth data commit is answered. */
  readonly killAtCommit?: number;
  /** KAFKA_LANCE_TEST_RECOVERY_DELAY_MS=<ms>: a slow startup recovery (0: none). */
  readonly recoveryDelayMs: number;
  /**
   * KAFKA_LANCE_TEST_BLOCK_LOOP_AT=<n>:<ms>[,<n>:<ms>...]: when the staging pool reports
   * its nth staged batch, busy-wait the main thread for <ms> (as a long GC pause does).
   */
  readonly blockLoopAt: readonly LoopBlock[];
  /** KAFKA_LANCE_TEST_BLOCK_LOOP_ON_SIGNAL=<ms>: each SIGUSR2 arms one such block. */
  readonly blockLoopOnSignalMs?: number;
  /**
   * KAFKA_LANCE_TEST_FAIL_FIRST_CLAIM=fetch|commit: the process's first claim fails
   * once, at its offsets fetch or at its claim commit.
   */
  readonly failFirstClaim?: ClaimStep;
  /**
   * KAFKA_LANCE_TEST_LOSE_COORDINATOR_AT=<n>: the nth batch kafkajs hands over crashes its
   * consumer with the error a coordinator lookup that found no broker ends in (every broker
   * restarting), which kafkajs does not restart from.
   */
  readonly loseCoordinatorAt?: number;
  /**
   * KAFKA_LANCE_TEST_DISK_FULL_STAGING / KAFKA_LANCE_TEST_DISK_FULL_LANCE=<file>: while
   * that file exists, every staging part write (Lance add) fails with ENOSPC.
   */
  readonly diskFullFlags: Readonly<Partial<Record<DiskStage, string>>>;
  /**
   * KAFKA_LANCE_TEST_MAX_CHAIN_BYTES=<bytes>: the ownership chain's bound lowered, so
   * that a chain drops its oldest epochs after a few rebalances instead of ~85.
   */
  readonly maxChainBytes?: number;
}

export interface LoopBlock {
  /** The staged batch (1-based, in the order the pool reports them) that blocks. */
  readonly batch: number;
  readonly ms: number;
}

export type ClaimStep = 'fetch' | 'commit';

/**
 * Where a process may kill (or stop) itself: each is a step of a publication after
 * which a restart must still end it exactly once.
 */
export const CRASH_POINT_NAMES = [
  'after-plan',
  'during-prepare',
  'before-add',
  'after-add',
  // After an add whose outcome is counted (a rejected add, an insert-if-absent), before the count.
  'before-confirm',
  'after-published',
  'after-sources-deleted',
  'after-plan-forgotten',
  'after-writing-forgotten',
  'after-quarantine-marked',
  'after-dead-letters-written',
  'after-first-part-quarantined',
  // A declared index's build has run for a moment and is not committed (crashPointAfter).
  'during-index-build',
  // A create of the table has committed; whether it landed over rows is not checked yet.
  'after-create',
  // A create landed over rows; they are not put back yet (lance-table.ts, #restore).
  'before-restore',
] as const;
export type CrashPointName = (typeof CRASH_POINT_NAMES)[number];

/** A process started without any test variable. */
export const NO_FAULTS: Faults = { recoveryDelayMs: 0, blockLoopAt: [], diskFullFlags: {} };

/** A KAFKA_LANCE_TEST_* variable holds a value its fault cannot take. */
export class FaultVariableError extends KafkaLanceError {
  constructor(
    readonly variable: string,
    readonly value: string,
    expected: string,
  ) {
    super('CONFIG_INVALID', `${variable} must be ${expected}, not ${JSON.stringify(value)}`, {
      context: { variable, value },
    });
  }
}

/** Reads every fault variable of `env`; an empty variable counts as unset. */
export function parseFaults(env: NodeJS.ProcessEnv): Faults {
  const read = (name: string): string | undefined => (env[name] === '' ? undefined : env[name]);
  const crashAt = read('KAFKA_LANCE_TEST_CRASH_AT');
  const stopAt = read('KAFKA_LANCE_TEST_STOP_AT');
  const killAtCommit = read('KAFKA_LANCE_TEST_KILL_AT_COMMIT');
  const recoveryDelay = read('KAFKA_LANCE_TEST_RECOVERY_DELAY_MS');
  const blockLoopAt = read('KAFKA_LANCE_TEST_BLOCK_LOOP_AT');
  const blockOnSignal = read('KAFKA_LANCE_TEST_BLOCK_LOOP_ON_SIGNAL');
  const failFirstClaim = read('KAFKA_LANCE_TEST_FAIL_FIRST_CLAIM');
  const diskFullStaging = read('KAFKA_LANCE_TEST_DISK_FULL_STAGING');
  const diskFullLance = read('KAFKA_LANCE_TEST_DISK_FULL_LANCE');
  const maxChainBytes = read('KAFKA_LANCE_TEST_MAX_CHAIN_BYTES');
  const loseCoordinatorAt = read('KAFKA_LANCE_TEST_LOSE_COORDINATOR_AT');
  return {
    ...(loseCoordinatorAt !== undefined
      ? { loseCoordinatorAt: positiveInteger('KAFKA_LANCE_TEST_LOSE_COORDINATOR_AT', loseCoordinatorAt) }
      : {}),
    ...(maxChainBytes !== undefined
      ? { maxChainBytes: chainBytes('KAFKA_LANCE_TEST_MAX_CHAIN_BYTES', maxChainBytes) }
      : {}),
    ...(crashAt !== undefined ? { crashAt: crashPointName('KAFKA_LANCE_TEST_CRASH_AT', crashAt) } : {}),
    ...(stopAt !== undefined ? { stopAt: crashPointName('KAFKA_LANCE_TEST_STOP_AT', stopAt) } : {}),
    ...(killAtCommit !== undefined
      ? { killAtCommit: positiveInteger('KAFKA_LANCE_TEST_KILL_AT_COMMIT', killAtCommit) }
      : {}),
    recoveryDelayMs:
      recoveryDelay === undefined
        ? 0
        : nonNegativeInteger('KAFKA_LANCE_TEST_RECOVERY_DELAY_MS', recoveryDelay),
    blockLoopAt: blockLoopAt === undefined ? [] : loopBlocks('KAFKA_LANCE_TEST_BLOCK_LOOP_AT', blockLoopAt),
    ...(blockOnSignal !== undefined
      ? { blockLoopOnSignalMs: positiveInteger('KAFKA_LANCE_TEST_BLOCK_LOOP_ON_SIGNAL', blockOnSignal) }
      : {}),
    ...(failFirstClaim !== undefined
      ? { failFirstClaim: claimStep('KAFKA_LANCE_TEST_FAIL_FIRST_CLAIM', failFirstClaim) }
      : {}),
    diskFullFlags: {
      ...(diskFullStaging !== undefined ? { staging: diskFullStaging } : {}),
      ...(diskFullLance !== undefined ? { lance: diskFullLance } : {}),
    },
  };
}

function crashPointName(variable: string, value: string): CrashPointName {
  const name = CRASH_POINT_NAMES.find((point) => point === value);
  if (name === undefined)
    throw new FaultVariableError(variable, value, `one of ${CRASH_POINT_NAMES.join(', ')}`);
  return name;
}

/** The chain's default bound (src/ownership/chain.ts) is the most a test may set. */
function chainBytes(variable: string, value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1 || n > 3_800)
    throw new FaultVariableError(variable, value, 'a number of bytes up to 3800');
  return n;
}

function positiveInteger(variable: string, value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) throw new FaultVariableError(variable, value, 'a positive integer');
  return n;
}

function nonNegativeInteger(variable: string, value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new FaultVariableError(variable, value, 'a number of ms');
  return n;
}

function loopBlocks(variable: string, value: string): LoopBlock[] {
  return value.split(',').map((pair) => {
    const match = /^(\d+):(\d+)$/.exec(pair.trim());
    if (!match) throw new FaultVariableError(variable, value, '<n>:<ms>[,<n>:<ms>...]');
    return { batch: Number(match[1]), ms: Number(match[2]) };
  });
}

function claimStep(variable: string, value: string): ClaimStep {
  if (value !== 'fetch' && value !== 'commit')
    throw new FaultVariableError(variable, value, 'fetch or commit');
  return value;
}
