import type { CompressionName } from './codec';

/** A compressed record batch whose records were reframed to their fields (record-framing.ts). */
export interface MisframedBatch {
  readonly codec: CompressionName;
  readonly firstOffset: number;
  readonly lastOffset: number;
  /** How many of its records' lengths were not their sizes. */
  readonly misframed: number;
}

/** What the fetch hook reads of a fetched record: the bytes it was cut from. */
interface CutRecord {
  readonly key: Uint8Array | null;
  readonly value: Uint8Array | null;
}

/**
 * The batches reframed lately, until the fetch that decoded them names their partition.
 * A codec sees only a records section, not whose it is; the reframed records are cut from
 * a buffer of their own (its ArrayBuffer is no other's), so the fetch hook finds their
 * partition by that identity, never by offsets two topics can share. Bounded: a notice
 * not claimed (its fetch failed after decoding) is dropped with the oldest, and the batch
 * is still read right; only its log line is lost.
 */
export class MisframedBatches {
  readonly #pending: { readonly bytes: ArrayBufferLike; readonly batch: MisframedBatch }[] = [];

  /** The codec reframed `batch` into `records`. */
  noted(records: Buffer, batch: MisframedBatch): void {
    this.#pending.push({ bytes: records.buffer, batch });
    if (this.#pending.length > MAX_PENDING) this.#pending.shift();
  }

  /** The reframed batches among `records` (one partition of a fetch), taken out of the pending ones. */
  take(records: readonly CutRecord[] | undefined): MisframedBatch[] {
    if (this.#pending.length === 0 || !records || records.length === 0) return [];
    const buffers = new Set<ArrayBufferLike>();
    for (const r of records) {
      const bytes = r.value ?? r.key;
      if (bytes) buffers.add(bytes.buffer);
    }
    const found: MisframedBatch[] = [];
    for (let i = this.#pending.length - 1; i >= 0; i--) {
      const entry = this.#pending[i]!;
      if (!buffers.has(entry.bytes)) continue;
      found.unshift(entry.batch);
      this.#pending.splice(i, 1);
    }
    return found;
  }
}

const MAX_PENDING = 64;

/** The process's one list: kafkajs's codec table, which notes into it, is one per process too. */
export const misframedBatches = new MisframedBatches();
