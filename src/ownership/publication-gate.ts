import { tpKey, type TopicPartitionKey } from '../common/offsets';
import type { PartitionCommit } from './offset-tracker';

/**
 * Commit after published (`offsets.commitAfter: 'published'`, DESIGN.md "Commit after
 * published"): a commit that the staged rule allows at a durability tick is held until
 * every staging part that existed at that tick, in the current epoch, is gone from the
 * staging directory. A part leaves only when its publication is durable (`published`
 * in the ledger, after the commit check on a store without atomic commits; its sources
 * are deleted after that) or when it is set aside with its rows dead-lettered (a part
 * set aside unreadable keeps holding: staging/part-ids.ts).
 *
 * Why "every part that existed": the records below a durable offset reported at a tick
 * were pushed before that tick's fsync, so they are in parts that existed then. The
 * gate does not need to know which partition a part holds (a part of another partition
 * only delays a commit by its own publication), nor anything of the materializer's
 * plans: the directory says it. A part is seen by whichever of two views it is in
 * when they are taken: the staging workers' unsealed parts (reported with the sync)
 * and a listing of the directory taken after them. A part leaves the first view only
 * after its rename to `.arrows`, so a rename racing the listing is always in the first.
 *
 * Parts on disk when the epoch began belong to older epochs (a join seals every open
 * part before the new epoch's first push): they never hold a commit of this epoch back.
 */
export class PublicationGate {
  /** Part ids of older epochs; undefined between a join and its epoch's start (nothing is released). */
  #older: ReadonlySet<string> | undefined;
  #candidates: Candidate[] = [];

  /** A join began: no commit is released until its epoch opens. Synchronous, like the tracker's revoke. */
  close(): void {
    this.#older = undefined;
    this.#candidates = [];
  }

  /** The epoch began; `existing` are the part ids on disk now (all of older epochs). */
  open(existing: Iterable<string>): void {
    this.#older = new Set(existing);
    this.#candidates = [];
  }

  get isOpen(): boolean {
    return this.#older !== undefined;
  }

  /**
   * One durability tick: `due` are the commits the staged rule allows now, `present`
   * the ids of the parts that exist now. Returns the newest commit per partition whose
   * parts are all gone (candidates are released in order: a part that still holds an
   * older candidate back was present for every newer one too).
   */
  tick(due: readonly PartitionCommit[], present: ReadonlySet<string>): PartitionCommit[] {
    const older = this.#older;
    if (older === undefined) return [];
    if (due.length > 0) {
      const blockers = new Set<string>();
      for (const id of present) if (!older.has(id)) blockers.add(id);
      this.#candidates.push({ commits: due, blockers });
    }
    const released = new Map<TopicPartitionKey, PartitionCommit>();
    while (this.#candidates.length > 0) {
      const first = this.#candidates[0]!;
      for (const id of first.blockers) if (!present.has(id)) first.blockers.delete(id);
      if (first.blockers.size > 0) break;
      for (const c of first.commits) released.set(tpKey(c.topic, c.partition), c);
      this.#candidates.shift();
    }
    // Publications stalled (the store is down): keep memory bounded by thinning the
    // queue. Dropping a candidate only delays a commit to the next one kept.
    if (this.#candidates.length > MAX_CANDIDATES) {
      this.#candidates = this.#candidates.filter((_, i) => i === 0 || i % 2 === 1);
    }
    return [...released.values()];
  }

  /** Candidates held back now (for logs and tests). */
  get waiting(): number {
    return this.#candidates.length;
  }
}

interface Candidate {
  readonly commits: readonly PartitionCommit[];
  readonly blockers: Set<string>;
}

const MAX_CANDIDATES = 1_000;
