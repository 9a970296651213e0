import * as path from 'node:path';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import type { ResolvedConsumer } from '../config';
import { KEY_COLUMN, type KnownField } from '../decode/record-decoder';
import { readKnownFields, readTableSchema } from './known-fields';
import type { LanceTarget } from './lance-table';

/*
 * What staging starts from for a table that may already exist: its columns and `_key`
 * type, read before the first batch (at start for the fixed table, when a staging lane
 * first sees a routed one), so that every worker of every replica types rows alike.
 */

/**
 * The consumer's Lance table: its uri (default: `lance` in the data directory), name and
 * store options. `table` names one of a routing consumer's tables (default: its `table`).
 */
export function lanceTargetOf(consumer: ResolvedConsumer, table: string = consumer.table): LanceTarget {
  return {
    uri: consumer.lance.uri ?? path.join(consumer.dataDir, 'lance'),
    table,
    ...(consumer.lance.storageOptions ? { storageOptions: consumer.lance.storageOptions } : {}),
  };
}

/**
 * A registry `keyFormat`: the Arrow type of the table's `_key` column (its text, as
 * publications compare types), so that every staging worker holds keys to it as value
 * columns are held to theirs; undefined when the table has no `_key` yet or cannot be read
 * (the publication-side check still holds).
 */
export async function tableKeyType(
  consumer: ResolvedConsumer,
  logger: Logger,
  table: string = consumer.table,
): Promise<string | undefined> {
  if (!consumer.includeKey || consumer.keyFormat === 'binary' || consumer.keyFormat === 'string')
    return undefined;
  try {
    const schema = await readTableSchema(lanceTargetOf(consumer, table));
    const key = schema?.fields.find((f) => f.name === KEY_COLUMN);
    return key === undefined ? undefined : String(key.type);
  } catch (error) {
    logger.warn(
      { event: 'schema.key.failed', table, err: errorMessage(error) },
      'could not read the table schema to hold _key to its type',
    );
    return undefined;
  }
}

/**
 * `schema: 'infer'`: the Lance table's column types, so that every staging worker of
 * every replica infers the same ones. A table that cannot be read yet (first start,
 * store unreachable) seeds nothing: the publication-side checks still hold.
 */
export async function tableColumns(
  consumer: ResolvedConsumer,
  logger: Logger,
  table: string = consumer.table,
): Promise<KnownField[]> {
  const target = lanceTargetOf(consumer, table);
  if (consumer.fields !== undefined || consumer.format !== 'json') return [];
  try {
    const fields = await readKnownFields(target);
    if (fields.length > 0)
      logger.info(
        { event: 'schema.seeded', table, columns: fields },
        'inferred columns seeded from the table',
      );
    return fields;
  } catch (error) {
    logger.warn(
      { event: 'schema.seed.failed', table, err: errorMessage(error) },
      'could not read the table schema to seed inferred columns',
    );
    return [];
  }
}

/**
 * A routing consumer's table, when a staging lane first sees it: the existing Lance
 * table's columns and `_key` type, read as the fixed table's are read once at start.
 */
export async function tableSeeds(
  consumer: ResolvedConsumer,
  table: string,
  logger: Logger,
): Promise<{ knownFields: KnownField[]; tableKeyType?: string }> {
  const knownFields = await tableColumns(consumer, logger, table);
  const keyType = await tableKeyType(consumer, logger, table);
  return { knownFields, ...(keyType === undefined ? {} : { tableKeyType: keyType }) };
}
