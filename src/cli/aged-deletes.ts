import type * as lancedb from '@lancedb/lancedb';
import {
  DELETED_COLUMN,
  OFFSET_COLUMN,
  PARTITION_COLUMN,
  ROW_COLUMN,
  TOPIC_COLUMN,
  TOPIC_ID_COLUMN,
} from '../staging/system-columns';
import { primaryKeyOf } from '../lance/table-schema';
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
 *
 * A position names one key's row except for a Debezium truncate, whose delete rows all sit
 * at its position: a delete of another key at that position may have landed since (a replay
 * of the truncate deleting a key re-created meanwhile), so the rows are matched by their key
 * columns' values too (strings, integers, booleans and binary: a key of times alone is
 * matched by position).
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
    const schema = await old.schema();
    const names = new Set(schema.fields.map((f) => f.name));
    if (!names.has(DELETED_COLUMN)) return undefined;
    const columns = [TOPIC_COLUMN, TOPIC_ID_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN, ROW_COLUMN].filter((c) =>
      names.has(c),
    );
    const keys = primaryKeyOf(schema).filter((c) => !columns.includes(c));
    const rows = (await old
      .query()
      .where(`${DELETED_COLUMN} = true`)
      .select([...columns, ...keys])
      .toArray()) as Record<string, unknown>[];
    if (rows.length === 0) return undefined;
    /** A row's position and key, as the old version held them and as the table holds them now. */
    const identity = (row: Record<string, unknown>) =>
      JSON.stringify([...columns, ...keys].map((c) => literalOf(row[c]) ?? null));
    const held = new Set(rows.map(identity));
    // Grouped by everything but the offset: one `IN` list of offsets per group, and one of
    // each key column's values.
    const groups = new Map<string, { where: string; offsets: string[]; keys: Map<string, Set<string>> }>();
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
      if (!group) groups.set(where, (group = { where, offsets: [], keys: new Map() }));
      group.offsets.push(String(row[OFFSET_COLUMN]));
      for (const c of keys) {
        const literal = literalOf(row[c]);
        if (literal === undefined) continue;
        let values = group.keys.get(c);
        if (!values) group.keys.set(c, (values = new Set()));
        values.add(literal);
      }
    }
    const positions = [...groups.values()]
      .map((g) => {
        const byKey = [...g.keys].map(
          ([c, values]) => ` AND ${quotedName(c)} IN (${[...values].join(', ')})`,
        );
        return `(${g.where} AND ${OFFSET_COLUMN} IN (${g.offsets.join(', ')})${byKey.join('')})`;
      })
      .join(' OR ');
    const superset = `${DELETED_COLUMN} = true AND (${positions})`;
    // The lists cross: a delete row of a listed key at another listed position (a truncate's,
    // landed since) matches too. Such rows, rare, are named and left out.
    const now = (await table
      .query()
      .where(superset)
      .select([...columns, ...keys])
      .toArray()) as Record<string, unknown>[];
    const younger = now
      .filter((row) => !held.has(identity(row)))
      .map(
        (row) =>
          `NOT (${[...columns, ...keys]
            .map((c) => {
              const literal = literalOf(row[c]);
              return literal === undefined ? undefined : `${quotedName(c)} = ${literal}`;
            })
            .filter((term) => term !== undefined)
            .join(' AND ')})`,
      );
    return younger.length === 0 ? superset : `${superset} AND ${younger.join(' AND ')}`;
  } finally {
    old.close();
  }
}

/** A value as a filter literal: strings, integers, booleans and binary; undefined for others. */
function literalOf(value: unknown): string | undefined {
  if (typeof value === 'string') return quote(value);
  if (typeof value === 'bigint' || (typeof value === 'number' && Number.isInteger(value)))
    return String(value);
  if (typeof value === 'boolean') return value ? 'TRUE' : 'FALSE';
  if (value instanceof Uint8Array)
    return `X'${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('hex')}'`;
  return undefined;
}

/** A column name as a filter reads it whatever its characters. */
const quotedName = (name: string) =>
  /^[a-z_][a-z0-9_]*$/.test(name) ? name : `\`${name.replace(/`/g, '``')}\``;
