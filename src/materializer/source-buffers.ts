/**
 * The buffers publications read their parts into, reused from one publication to the
 * next. A fresh buffer per publication outlives a scavenge (it is held through the
 * preparation and the add) and V8 then counts it against the old generation's limit:
 * on this thread's small heap that was a full mark every ~10 MiB published
 * (bench/hot-path-levers.md). A reused buffer is counted once.
 *
 * At most `keep` free buffers are kept, the largest first; a released buffer is never
 * written by this pool again until it is leased again.
 */
export class SourceBuffers {
  readonly #free: Buffer[] = [];

  /**
   * `keep`: free buffers kept (the publications in flight at once: two when streamed);
   * `keepUpTo`: the largest buffer kept (a rare larger publication's is let go, so that
   * idle memory stays within what the usual publication needs).
   */
  constructor(
    private readonly keep: number,
    private readonly keepUpTo: number,
  ) {}

  /** A buffer of at least `bytes` (its capacity rounded up to a MiB, so that sizes near each other share buffers). */
  lease(bytes: number): Buffer {
    // The smallest free buffer that holds it (the list runs from the largest down).
    const at = this.#free.findLastIndex((b) => b.byteLength >= bytes);
    if (at >= 0) return this.#free.splice(at, 1)[0]!;
    // Every free buffer is too small: the smallest would only be kept beside the new one.
    if (this.#free.length >= this.keep) this.#free.pop();
    return Buffer.allocUnsafeSlow(Math.ceil(bytes / MIB) * MIB);
  }

  /** Bytes held by the free buffers (what idle publications keep). */
  get keptBytes(): number {
    return this.#free.reduce((n, b) => n + b.byteLength, 0);
  }

  /** Gives `buffer` back: nothing may read or write it afterwards. */
  release(buffer: Buffer): void {
    if (buffer.byteLength > this.keepUpTo) return;
    this.#free.push(buffer);
    this.#free.sort((a, b) => b.byteLength - a.byteLength);
    this.#free.length = Math.min(this.#free.length, this.keep);
  }
}

const MIB = 1024 * 1024;
