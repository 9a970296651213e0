import { tpKey, type DurableOffset, type TopicPartitionKey } from '../common/offsets';

/**
 * Which tables of a staging lane have seen each partition, and what the lane reports
 * durable per partition across them.
 *
 * A partition's records may go to several tables, each with its own parts and its own
 * durable offsets. Every batch's last offset is pushed to every table that has seen the
 * partition (so a table that gets none of the partition's later records still follows
 * it, and never holds the partition's commit back), and the partition is durable up to
 * the minimum over those tables. A batch that reached no table (all its records dead
 * letters, before any table saw the partition) is handled once it is staged: its offset
 * counts while no table has seen the partition.
 */
export class TableDurability {
  readonly #seenBy = new Map<TopicPartitionKey, Set<string>>();
  readonly #tableless = new Map<TopicPartitionKey, DurableOffset>();

  /** Records `table` as one that follows the partition from now on. */
  saw(topic: string, partition: number, table: string): void {
    const key = tpKey(topic, partition);
    let tables = this.#seenBy.get(key);
    if (!tables) this.#seenBy.set(key, (tables = new Set()));
    tables.add(table);
  }

  /** The tables that follow the partition (each batch's last offset is pushed to each). */
  tablesOf(topic: string, partition: number): ReadonlySet<string> {
    return this.#seenBy.get(tpKey(topic, partition)) ?? EMPTY;
  }

  /** A batch that no table has taken: every record of it up to `through` is handled. */
  handledWithoutTable(topic: string, partition: number, through: DurableOffset): void {
    const key = tpKey(topic, partition);
    if ((this.#tableless.get(key) ?? -1) < through) this.#tableless.set(key, through);
  }

  /** The partition was lost or claimed anew: the table-less offset follows the tables' high-waters down. */
  lower(topic: string, partition: number, ceiling: DurableOffset): void {
    const key = tpKey(topic, partition);
    const at = this.#tableless.get(key);
    if (at !== undefined && at > ceiling) this.#tableless.set(key, ceiling);
  }

  /**
   * Per partition, the highest offset durable in every table that has seen it; a table
   * that has seen it but reports nothing durable yet holds it back (it is left out).
   */
  merge(
    durableByTable: ReadonlyMap<string, ReadonlyMap<TopicPartitionKey, DurableOffset>>,
  ): Map<TopicPartitionKey, DurableOffset> {
    const merged = new Map<TopicPartitionKey, DurableOffset>();
    for (const [key, tables] of this.#seenBy) {
      let min: DurableOffset | undefined;
      for (const table of tables) {
        const offset = durableByTable.get(table)?.get(key);
        if (offset === undefined) {
          min = undefined;
          break;
        }
        if (min === undefined || offset < min) min = offset;
      }
      if (min !== undefined) merged.set(key, min);
    }
    for (const [key, offset] of this.#tableless) if (!this.#seenBy.has(key)) merged.set(key, offset);
    return merged;
  }
}

const EMPTY: ReadonlySet<string> = new Set();
