/**
 * The change records of the end-to-end upsert arm (bench/upsert-e2e.ts): a seeded plan of
 * updates, new keys and tombstones against a table of `seedKeys` keys, the Kafka records it
 * becomes, and the state the table must end in. Pure, so that the proportions and the
 * expected state are unit-tested (test/bench/upsert-changes.test.ts).
 */

export const UPDATE = 0;
export const INSERT = 1;
export const DELETE = 2;
export type ChangeKind = typeof UPDATE | typeof INSERT | typeof DELETE;

/** Change i: `kinds[i]` on key number `keys[i]`. */
export interface ChangePlan {
  readonly seedKeys: number;
  readonly keys: Int32Array;
  readonly kinds: Uint8Array;
}

/** A seeded generator (mulberry32): the same plan on every run, so a produced topic is reused. */
export function seededRandom(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * `count` changes into keys 0 … seedKeys − 1: 80 % updates of a seeded key, 10 % new keys
 * (seedKeys, seedKeys + 1, … each once), 10 % tombstones of a seeded key, drawn uniformly.
 */
export function changePlan(seedKeys: number, count: number, seed = 42): ChangePlan {
  const next = seededRandom(seed);
  const keys = new Int32Array(count);
  const kinds = new Uint8Array(count);
  let fresh = seedKeys;
  for (let i = 0; i < count; i++) {
    const r = next();
    if (r < 0.8) {
      keys[i] = Math.floor(next() * seedKeys);
      kinds[i] = UPDATE;
    } else if (r < 0.9) {
      keys[i] = fresh++;
      kinds[i] = INSERT;
    } else {
      keys[i] = Math.floor(next() * seedKeys);
      kinds[i] = DELETE;
    }
  }
  return { seedKeys, keys, kinds };
}

/** The record key (and the row's `_key`) of key number k. */
export function keyName(k: number): string {
  return `key-${k.toString().padStart(9, '0')}`;
}

/** The marker key produced last in partition p: its row visible means p's records are. */
export function markerKey(partition: number): string {
  return `~end-${partition}`;
}

/** Kafka's partition of key number k (explicit, so that a key's records keep their order). */
export function partitionOf(k: number, partitions: number): number {
  return k % partitions;
}

/** `n` of a seeded row: no change wrote it. */
export const SEEDED_N = -1;

/** The JSON value (~100 bytes) of change i, or null for a tombstone. */
export function changeValue(plan: ChangePlan, i: number): string | null {
  if (plan.kinds[i] === DELETE) return null;
  const k = plan.keys[i]!;
  return JSON.stringify({ n: i, body: `change ${i} of ${keyName(k)} `.padEnd(72, '.') });
}

/** The value of partition p's marker record. */
export function markerValue(partition: number): string {
  return JSON.stringify({ n: -2 - partition, body: 'end of the change records' });
}

export interface Counts {
  readonly updates: number;
  readonly inserts: number;
  readonly deletes: number;
  /** UTF-8 bytes of the change values (tombstones: none). */
  readonly valueBytes: number;
}

export function planCounts(plan: ChangePlan): Counts {
  let updates = 0;
  let inserts = 0;
  let deletes = 0;
  let valueBytes = 0;
  for (let i = 0; i < plan.kinds.length; i++) {
    const kind = plan.kinds[i];
    if (kind === UPDATE) updates++;
    else if (kind === INSERT) inserts++;
    else deletes++;
    const value = changeValue(plan, i);
    if (value !== null) valueBytes += Buffer.byteLength(value);
  }
  return { updates, inserts, deletes, valueBytes };
}

/** What the upsert table holds once every change (and no marker) is in. */
export interface ExpectedTable {
  /** Rows in all: one per key ever seen (a deleted key stays as its `_deleted` row). */
  readonly rows: number;
  /** Rows with `_deleted = false`: seeded keys + new keys − keys whose last change is a tombstone. */
  readonly live: number;
  readonly deletedKeys: number;
  /** The newest state of key k: its last change's index and whether it deleted; undefined: never changed. */
  newest(k: number): { readonly change: number; readonly deleted: boolean } | undefined;
}

export function expectedTable(plan: ChangePlan): ExpectedTable {
  const { seedKeys, keys, kinds } = plan;
  let maxKey = seedKeys - 1;
  for (const k of keys) if (k > maxKey) maxKey = k;
  const last = new Int32Array(maxKey + 1).fill(-1);
  for (let i = 0; i < keys.length; i++) last[keys[i]!] = i;
  let deletedKeys = 0;
  let newKeys = 0;
  for (let k = 0; k <= maxKey; k++) {
    const i = last[k]!;
    if (k >= seedKeys && i >= 0) newKeys++;
    if (i >= 0 && kinds[i] === DELETE) deletedKeys++;
  }
  return {
    rows: seedKeys + newKeys,
    live: seedKeys + newKeys - deletedKeys,
    deletedKeys,
    newest(k) {
      const i = k <= maxKey ? last[k]! : -1;
      return i < 0 ? undefined : { change: i, deleted: kinds[i] === DELETE };
    },
  };
}
