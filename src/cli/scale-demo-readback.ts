import type { Admin, Kafka } from 'kafkajs';
import type { ResolvedConsumer } from '../config';
import { sumHigh } from './demo';
import { scanRun, type RunRanges, type RunScan } from './demo-summary';
import { TableMissingError } from './errors';
import { topicEnds, type PartitionEnds } from './kafka-admin';
import { openExistingTable } from './lance-read';
import { SCALE_DLQ, SCALE_TOPIC } from './scale-demo-topic';

/**
 * What the scale demo reads back once its replicas stopped, for its checks: the rows
 * of this run in the shared table, and the distinct records in the dead-letter topic.
 */

export async function scanTable(consumer: ResolvedConsumer, ranges: RunRanges): Promise<RunScan> {
  const opened = await openExistingTable(consumer).catch((error: unknown) => {
    if (error instanceof TableMissingError) return undefined;
    throw error;
  });
  if (!opened) return { rows: 0, duplicates: 0, levels: new Map(), lastErrors: [] };
  try {
    return await scanRun(opened.table, ranges, SCALE_TOPIC);
  } finally {
    opened.close();
  }
}

export interface DeadLetters {
  /** Records written to the DLQ during the run. */
  readonly written: number;
  /** Distinct source records among them (a record redelivered after the kill is dead-lettered again). */
  readonly distinct: number;
}

/**
 * Reads the DLQ (from its start: it is small) and counts this run's distinct source records
 * by their Connect headers: dead letters written during the run, of source records produced
 * during the run (a group left behind by an interrupted earlier run against the same broker
 * consumes, and dead-letters, that run's records too; they are not this run's).
 */
export async function distinctDeadLetters(
  kafka: Kafka,
  admin: Admin,
  startEnds: readonly PartitionEnds[] | undefined,
  sourceTopic: string,
  sourceStart: readonly PartitionEnds[],
): Promise<DeadLetters> {
  const fromSource = (p: number) => sourceStart.find((s) => s.partition === p)?.high ?? 0;
  const ends = (await topicEnds(admin, SCALE_DLQ)) ?? [];
  const from = (p: number) => startEnds?.find((s) => s.partition === p)?.high ?? 0;
  const todo = new Map(ends.filter((e) => e.high > from(e.partition)).map((e) => [e.partition, e.high]));
  const written = sumHigh(ends) - sumHigh(startEnds);
  if (todo.size === 0) return { written, distinct: 0 };
  const groupId = `kafka-lance-scale-demo-dlq-${Date.now()}`;
  const reader = kafka.consumer({ groupId });
  const seen = new Set<string>();
  await reader.connect();
  try {
    await reader.subscribe({ topic: SCALE_DLQ, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timeout = setTimeout(
        () => reject(new Error(`could not read ${SCALE_DLQ} back within 60 s`)),
        60_000,
      );
      reader
        .run({
          autoCommit: false,
          eachMessage: ({ partition, message }) => {
            const offset = Number(message.offset);
            if (offset >= from(partition) && offset < (todo.get(partition) ?? 0)) {
              const h = (k: string) => message.headers?.[`__connect.errors.${k}`]?.toString() ?? '';
              const source = { partition: Number(h('partition')), offset: Number(h('offset')) };
              if (h('topic') === sourceTopic && source.offset >= fromSource(source.partition))
                seen.add(`${source.partition}/${source.offset}`);
            }
            if (offset + 1 >= (todo.get(partition) ?? 0)) todo.delete(partition);
            if (todo.size === 0) {
              clearTimeout(timeout);
              resolve();
            }
            return Promise.resolve();
          },
        })
        .catch(reject);
    });
  } finally {
    await reader.disconnect();
    await admin.deleteGroups([groupId]).catch(() => undefined);
  }
  return { written, distinct: seen.size };
}
