import { DataType, Precision, TimeUnit, type Schema } from 'apache-arrow';
import type { InferredTypeName } from '../decode/field-codec';
import type { KnownField } from '../decode/record-decoder';
import { connectTarget, type SharedConnections } from './connect';
import type { LanceTarget } from './lance-table';
import { openTableIfCommitted } from './open-if-committed';

/**
 * The columns an existing table already has, as seeds for `schema: 'infer'`: every
 * staging worker of every replica then gives a column the table's type, whatever
 * kind of value it happens to see first, and a value of another kind is a dead
 * letter at decode time instead of a publication the table refuses.
 *
 * Utf8 columns are not seeded: an inferred string column and an inferred json column
 * are both Utf8 in the table, and seeding one as the other would refuse valid values.
 * A number arriving first for such a column is caught when its publication is refused
 * (it is set aside with its rows in the dead-letter file, never blocking the table).
 * Names starting with "_" are kafka-lance's own columns.
 */
export async function readKnownFields(target: LanceTarget): Promise<KnownField[]> {
  const schema = await readTableSchema(target);
  return (schema?.fields ?? []).flatMap((f) => {
    const type = fieldTypeOf(f.type as DataType);
    return type && !f.name.startsWith('_') ? [{ name: f.name, type }] : [];
  });
}

/**
 * The table's Arrow schema, or undefined when the table does not exist yet. With
 * `connections` (a worker serving many tables), the worker's connection is borrowed: a
 * connection made and closed for each table opened cost the materializer thread ~5 ms a
 * close (bench/many-tables.md).
 */
export async function readTableSchema(
  target: LanceTarget,
  connections?: SharedConnections,
): Promise<Schema | undefined> {
  const lent = connections ? await connections.acquire(target, 'latest') : undefined;
  const db = lent?.db ?? (await connectTarget(target, 'latest'));
  try {
    // A table another replica is creating is listed before it is committed: not there yet.
    const table = await openTableIfCommitted(db, target.table);
    if (!table) return undefined;
    try {
      return await table.schema();
    } finally {
      table.close();
    }
  } finally {
    if (lent) lent.release();
    else db.close();
  }
}

/**
 * Only the Arrow types inference itself makes are seeded, each exactly: a column a
 * definition declared as float32, int8, timestamp(us) and so on would otherwise be
 * seeded as float64, int64, timestamp(ms) and every inferred value for it refused by
 * the table at publication instead of at decode.
 */
function fieldTypeOf(type: DataType): InferredTypeName | undefined {
  if (DataType.isFloat(type)) return type.precision === Precision.DOUBLE ? 'float64' : undefined;
  if (DataType.isInt(type) && type.isSigned) {
    if (type.bitWidth === 32) return 'int32';
    return type.bitWidth === 64 ? 'int64' : undefined;
  }
  if (DataType.isBool(type)) return 'boolean';
  if (DataType.isTimestamp(type))
    return type.unit === TimeUnit.MILLISECOND && !type.timezone ? 'timestamp' : undefined;
  return undefined;
}
