import type { Admin } from 'kafkajs';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import { ConfigError, type ResolvedConsumer, type ResolvedField } from '../config';
import { NATIVE_MODULE_PATH, nativeJsonModule } from '../decode/native-json-columns';
import { RecordDecoder } from '../decode/record-decoder';
import { groupTopics } from '../kafka/group-topics';
import { declaredTypeChanges } from '../lance/declared-schema';
import { readTableSchema } from '../lance/known-fields';
import { lanceTargetOf } from '../lance/table-seeds';
import { ROW_KEY_COLUMNS, primaryKeyOf } from '../lance/table-schema';

/*
 * What a replica reads and checks before it consumes: each function stops the start
 * with a named cause, or logs and lets it go on where the later stages still guard.
 */

/**
 * A declared schema against the existing table: a field whose type changed is refused
 * here, naming it and both types (declared-schema.ts). A table that cannot be read
 * (first start, store unreachable) is not checked: publications still refuse a
 * conflicting column and set the parts aside.
 */
export async function checkDeclaredTypes(
  consumer: ResolvedConsumer,
  fields: readonly ResolvedField[],
  logger: Logger,
): Promise<void> {
  const target = lanceTargetOf(consumer);
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

/**
 * The definition's mode against the existing table: an upsert into a table keyed otherwise
 * (an append table's row key, another key) would replace nothing, and an append into an
 * upsert table would hold a key twice; both stop the start, naming the table's key. A table
 * that cannot be read is not checked here: an upsert publication still refuses it.
 */
export async function checkTableMode(consumer: ResolvedConsumer, logger: Logger): Promise<void> {
  let schema;
  try {
    schema = await readTableSchema(lanceTargetOf(consumer));
  } catch (error) {
    logger.warn(
      { event: 'mode.check.failed', err: errorMessage(error) },
      'could not read the table schema to check its mode and key',
    );
    return;
  }
  if (!schema) return;
  const key = primaryKeyOf(schema);
  // An append table's key is the row key (or none, when created before keys were set).
  const upsertTable = key.some((c) => !ROW_KEY_COLUMNS.includes(c));
  const want = consumer.upsertKey;
  if (want && key.join(',') !== want.join(',')) {
    throw new ConfigError(consumer.source, [
      {
        field: 'key',
        message: `table ${consumer.table} is keyed on (${key.join(', ')}), not (${want.join(', ')}): ${upsertTable ? 'it is an upsert table with another key' : 'it was created in append mode'}; upsert into a new table`,
      },
    ]);
  }
  if (!want && upsertTable) {
    throw new ConfigError(consumer.source, [
      {
        field: 'mode',
        message: `table ${consumer.table} is an upsert table keyed on (${key.join(', ')}): appending would hold its keys twice; set mode: "upsert" with its key`,
      },
    ]);
  }
}

/** A missing topic is a configuration error: say which, instead of kafkajs's "does not host this topic-partition". */
export async function checkTopicsExist(admin: Admin, consumer: ResolvedConsumer): Promise<void> {
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
  await checkTruncateTopic(admin, consumer);
}

/**
 * `truncate: 'apply'` on a topic of one partition only: a truncate has no key, so Kafka
 * orders it against its own partition's records alone, and a key's record on another
 * partition could land after it and come back.
 */
async function checkTruncateTopic(admin: Admin, consumer: ResolvedConsumer): Promise<void> {
  if (consumer.truncate !== 'apply' || !consumer.topics) return;
  const metadata = await admin.fetchTopicMetadata({ topics: [...consumer.topics] });
  for (const topic of metadata.topics)
    if (topic.partitions.length !== 1)
      throw new ConfigError(consumer.source, [
        {
          field: 'truncate',
          message: `truncate "apply" needs a topic of one partition (a truncate has no key, and Kafka orders it against its own partition only): ${topic.name} has ${topic.partitions.length}; use truncate: "dead-letter"`,
        },
      ]);
}

/** Logs the group's committed offsets at start (a read that fails is logged, not fatal). */
export async function logCommittedOffsets(
  admin: Admin,
  consumer: ResolvedConsumer,
  logger: Logger,
): Promise<void> {
  const topics = await groupTopics(admin, consumer);
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

/**
 * Which decoder reads this consumer's JSON: the native one (native/json-columns) where
 * it is built and takes every declared field, the TypeScript one otherwise. Not built
 * is a warning: the rows are the same, the CPU per record is not.
 */
export function logJsonDecoder(consumer: ResolvedConsumer, logger: Logger): void {
  if (consumer.format !== 'json') return;
  if (new RecordDecoder(consumer).native) {
    logger.info({ event: 'decode.json.native' }, 'JSON values are read by the native decoder');
  } else if (nativeJsonModule() === undefined) {
    logger.warn(
      { event: 'decode.json.fallback', module: NATIVE_MODULE_PATH },
      'the native JSON decoder is not built (npm run build builds it where cargo is on PATH): ' +
        'the TypeScript decoder reads every record (the same rows, more CPU per record)',
    );
  } else {
    logger.info(
      { event: 'decode.json.typescript' },
      'JSON values are read by the TypeScript decoder: the native one takes declared string, int32, ' +
        'int64, float64, boolean, timestamp (ms) and json fields without keys or a transform',
    );
  }
}
