/**
 * The records of a log with gaps, as a reader read them: a compacted topic (the cleaner
 * removed superseded records), transactions (aborted records and markers are never
 * delivered), a log start moved by retention or deleteRecords. The final check then holds
 * these offsets, not every offset from the log start to its end, to be rows or dead
 * letters, and no row to be at an offset outside them.
 */
export interface ReadableOffsets {
  /** Who read them and when, for the report ("a read_committed kafkajs consumer after the cleaner ran"). */
  readonly reader: string;
  /** partition → every offset the reader read. */
  readonly offsets: ReadonlyMap<number, ReadonlySet<number>>;
}

export function readableCount(r: ReadableOffsets): number {
  let n = 0;
  for (const set of r.offsets.values()) n += set.size;
  return n;
}

/**
 * The records of a topic deleted and recreated under its name: its offsets start at 0
 * again, so (partition, offset) repeats and only `_topic_id` tells the incarnations
 * apart. The final check then counts per incarnation: rows unique by (_topic,
 * _partition, _offset, _topic_id), and each incarnation's rows exactly its expected set.
 */
export interface Incarnations {
  /** Where the sets come from, for the report. */
  readonly reader: string;
  /** topic id → partition → every offset that must be a row of that incarnation (all JSON: no dead letter expected). */
  readonly byTopicId: ReadonlyMap<string, ReadonlyMap<number, ReadonlySet<number>>>;
}

export function incarnationCount(i: Incarnations): number {
  let n = 0;
  for (const parts of i.byTopicId.values()) for (const set of parts.values()) n += set.size;
  return n;
}
