import type * as lancedb from '@lancedb/lancedb';
import {
  DELETED_COLUMN,
  OFFSET_COLUMN,
  PARTITION_COLUMN,
  ROW_COLUMN,
  TOPIC_COLUMN,
  TOPIC_ID_COLUMN,
} from '../staging/system-columns';
import { quote } from './lance-read';

/**
 * The delete rows of an upsert table that landed in it before `before` (epoch ms), for
 * `compact --purge-deletes-older-than`. Their age is when the merge wrote them, read from
 * Lance's versions, not the record's `_timestamp`: a replica catching up on old records
 * writes deletes whose producer time is long past, and purging such a delete at once would
 * let an older record of its key, published a moment later, bring the key back.
 *
 * A delete row is old enough when the version that was the table's latest at `before`
 * held it already: the same record (its position) and still a delete. A row a newer record
 * replaced since has another position and stays. When no version that old is left (a
 * cleanup removed it), nothing can be shown old enough and nothing is purged.
 */
export async function agedDeletesFilter(
  db: lancedb.Connection,
  table: lancedb.Table,
  tableName: string,
  before: number,
): Promise<string | undefined> {
  const versions = (await table.listVersions())
    .filter((v) => v.timestamp.getTime() < before)
    .sort((a, b) => a.version - b.version);
  const then = versions.at(-1);
  if (!then) return undefined;
  const old = await db.openTable(tableName);
  try {
    await old.checkout(then.version);
    const names = new Set((await old.schema()).fields.map((f) => f.name));
    if (!names.has(DELETED_COLUMN)) return undefined;
    const columns = [TOPIC_COLUMN, TOPIC_ID_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN, ROW_COLUMN].filter((c) =>
      names.has(c),
    );
    const rows = (await old.query().where(`${DELETED_COLUMN} = true`).select(columns).toArray()) as Record<
      string,
      unknown
    >[];
    if (rows.length === 0) return undefined;
    // Grouped by everything but the offset: one `IN` list of offsets per group.
    const groups = new Map<string, { where: string; offsets: string[] }>();
    for (const row of rows) {
      const parts = columns
        .filter((c) => c !== OFFSET_COLUMN)
        .map((c) => {
          const value = row[c];
          if (value === null || value === undefined) return `${c} IS NULL`;
          if (typeof value === 'string') return `${c} = ${quote(value)}`;
          if (typeof value === 'number' || typeof value === 'bigint') return `${c} = ${value}`;
          throw new Error(`column ${c} of a delete row holds ${typeof value}, not a position`);
        });
      const where = parts.join(' AND ');
      let group = groups.get(where);
      if (!group) groups.set(where, (group = { where, offsets: [] }));
      group.offsets.push(String(row[OFFSET_COLUMN]));
    }
    const positions = [...groups.values()]
      .map((g) => `(${g.where} AND ${OFFSET_COLUMN} IN (${g.offsets.join(', ')}))`)
      .join(' OR ');
    return `${DELETED_COLUMN} = true AND (${positions})`;
  } finally {
    old.close();
  }
}
