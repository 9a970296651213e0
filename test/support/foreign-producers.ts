import { createHash } from 'node:crypto';
import * as path from 'node:path';
import { ROOT } from '../../src/common/repo-root';
import { runBounded } from './run-bounded';

/**
 * Producers nobody here wrote, for topics the replica must read as any production
 * topic: the Java producer (kafka-console-producer, from the Kafka jars that
 * deploy/kafka-local fetches) and librdkafka's (kcat, Debian's package, installed by
 * deploy/kcat/install-kcat). Each writes newline-separated values from stdin, one
 * record each, without keys.
 */
export type ProducerCodec = 'none' | 'gzip' | 'snappy' | 'lz4' | 'zstd';

// From the repository root: this runs from source under jest and compiled in the qualification.
const DEPLOY = path.join(ROOT, 'deploy');

function check(what: string, run: ReturnType<typeof runBounded>): void {
  if (run.status !== 0) throw new Error(`${what} failed (exit ${run.status}): ${run.stderr || run.stdout}`);
}

/** kcat on PATH (installs Debian's package if missing: the tests run as root, as CI does). */
export function ensureKcat(): void {
  check('deploy/kcat/install-kcat', runBounded(path.join(DEPLOY, 'kcat/install-kcat'), []));
}

/**
 * The Java producer with `compression.type` = `codec`, batches of up to 1 MiB (each
 * lz4 frame then holds many 64 KiB blocks, each snappy stream many xerial chunks),
 * acks=all.
 */
export function produceWithJava(
  brokers: readonly string[],
  topic: string,
  codec: ProducerCodec,
  values: readonly string[],
): void {
  const run = runBounded(
    path.join(DEPLOY, 'kafka-local/kafka-local'),
    [
      'console-producer',
      '--bootstrap-server',
      brokers.join(','),
      '--topic',
      topic,
      '--compression-codec',
      codec,
      '--batch-size',
      '1048576',
      '--producer-property',
      'linger.ms=200',
      '--producer-property',
      'acks=all',
    ],
    { input: `${values.join('\n')}\n`, timeoutMs: 120_000 },
  );
  check(`the Java producer (${codec}) to ${topic}`, run);
}

/** librdkafka's producer (kcat) with `compression.codec` = `codec`, acks=all. */
export function produceWithKcat(
  brokers: readonly string[],
  topic: string,
  codec: ProducerCodec,
  values: readonly string[],
): void {
  const run = runBounded(
    'kcat',
    [
      '-P',
      '-b',
      brokers.join(','),
      '-t',
      topic,
      '-z',
      codec,
      '-X',
      'acks=all',
      '-X',
      'linger.ms=200',
      '-X',
      'batch.size=1000000',
    ],
    { input: `${values.join('\n')}\n`, timeoutMs: 120_000 },
  );
  check(`kcat (${codec}) to ${topic}`, run);
}

export const sha256 = (bytes: Uint8Array | string): string =>
  createHash('sha256').update(bytes).digest('hex');

/**
 * `count` log-like JSON values (one line each) naming who wrote them, of varied sizes:
 * most a few hundred bytes, every 50th ~6 KiB, so batches hold long and short records.
 */
export function foreignValues(label: string, count: number): string[] {
  const levels = ['info', 'warn', 'error', 'debug'];
  return Array.from({ length: count }, (_, i) =>
    JSON.stringify({
      n: i,
      producer: label,
      level: levels[i % 4],
      service: `checkout-${i % 7}`,
      message: `request ${i} handled in ${(i * 7919) % 1000} ms${i % 50 === 0 ? ` ${'stack frame '.repeat(500)}` : ''}`,
      trace: sha256(`${label}-${i}`).slice(0, 32),
    }),
  );
}
