import type { CompressionName } from './codec';

/** A compressed record batch whose records were reframed to their fields (record-framing.ts). */
export interface MisframedBatch {
  readonly codec: CompressionName;
  readonly firstOffset: number;
  readonly lastOffset: number;
  /** How many of its records' lengths were not their sizes. */
  readonly misframed: number;
}

/** What the fetch hook reads of a fetched record: the bytes it was cut from, and its batch. */
interface CutRecord {
  readonly key: Uint8Array | null;
  readonly value: Uint8Array | null;
  readonly batchContext?: object;
}

/**
 * The batches reframed lately, until the fetch that decoded them names their partition.
 * A codec sees only a records section, not whose it is; the reframed records are cut from
 * a buffer of their own (its ArrayBuffer is no other's), so the fetch hook finds their
 * partition by that identity, never by offsets two topics can share. Held weakly by that
 * buffer: a note nobody claims (its fetch was dropped: a corrupt batch beside it, an offset
 * out of range) goes with its records, and costs the fetches after it nothing.
 */
export class MisframedBatches {
  readonly #notes = new WeakMap<ArrayBufferLike, MisframedBatch>();
  /** Whether any batch was ever reframed: most processes never see one, and skip the records. */
  #ever = false;

  /** The codec reframed `batch` into `records`. */
  noted(records: Buffer, batch: MisframedBatch): void {
    this.#notes.set(records.buffer, batch);
    this.#ever = true;
  }

  /**
   * The reframed batches among `records` (one partition of a fetch), each taken once: one
   * lookup per record batch, by the first of its records that has a key or a value.
   */
  take(records: readonly CutRecord[] | undefined): MisframedBatch[] {
    if (!this.#ever || !records) return [];
    const found: MisframedBatch[] = [];
    let batch: object | undefined;
    let looked = false;
    for (const r of records) {
      if (r.batchContext !== batch) {
        batch = r.batchContext;
        looked = false;
      }
      if (looked) continue;
      const bytes = r.value ?? r.key;
      if (!bytes) continue;
      looked = true;
      const note = this.#notes.get(bytes.buffer);
      if (note === undefined) continue;
      this.#notes.delete(bytes.buffer);
      found.push(note);
    }
    return found;
  }
}

/** The process's one list: kafkajs's codec table, which notes into it, is one per process too. */
export const misframedBatches = new MisframedBatches();
