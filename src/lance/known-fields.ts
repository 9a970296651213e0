import * as lancedb from '@lancedb/lancedb';
import { Type, type DataType } from 'apache-arrow';
import type { FieldTypeName } from '../config';
import type { KnownField } from '../decode/record-decoder';
import type { LanceTarget } from './lance-table';

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
  const db = await lancedb.connect(
    target.uri,
    target.storageOptions ? { storageOptions: { ...target.storageOptions } } : {},
  );
  try {
    if (!(await db.tableNames()).includes(target.table)) return [];
    const table = await db.openTable(target.table);
    try {
      const schema = await table.schema();
      return schema.fields.flatMap((f) => {
        const type = fieldTypeOf(f.type as DataType);
        return type && !f.name.startsWith('_') ? [{ name: f.name, type }] : [];
      });
    } finally {
      table.close();
    }
  } finally {
    db.close();
  }
}

function fieldTypeOf(type: DataType): FieldTypeName | undefined {
  switch (type.typeId) {
    case Type.Float:
      return 'float64';
    case Type.Int:
      return (type as DataType & { bitWidth: number }).bitWidth === 32 ? 'int32' : 'int64';
    case Type.Bool:
      return 'boolean';
    case Type.Timestamp:
      return 'timestamp';
    default:
      return undefined;
  }
}
