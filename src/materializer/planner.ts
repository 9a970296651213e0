import { decodeTime } from 'ulid';
import { tpKey, type TopicPartitionKey } from '../common/offsets';
import type { ChainEntry } from '../ownership/chain';
import type { PartitionOwnership } from '../ownership/partition-ownership';
import { nearChainEnd, publishableRange } from '../ownership/publishable-range';
import { parsePartName } from '../staging/part-name';
import type { SealedPart } from '../staging/sealed-part';
import { keptRowsOfRanges } from './keep-range';
import type { KeepRange, LedgerEntry, PlanPart, PlanWrite } from './ledger';
import * as path from 'node:path';

/** offsets.commitAfter: what a commit of this replica waits for. */
export type CommitAfter = 'staged' | 'published';

export interface PlannerInput {
  readonly parts: readonly SealedPart[];
  readonly ownership: ReadonlyMap<TopicPartitionKey, PartitionOwnership>;
  /** This process's owner id: its newest epochs are still moving (their ceiling is the next commit). */
  readonly liveOwner: string;
  /**
   * 'published': the offsets of this process's running epochs are committed only after
   * their rows are published, so those rows are planned as soon as they are sealed (no
   * ceiling until the epoch ends). Default 'staged'.
   */
  readonly commitAfter?: CommitAfter;
  /** Parts already in a plan: never planned twice. */
  readonly planned: ReadonlySet<string>;
  readonly maxPublicationBytes: number;
  readonly maxPublicationDelayMs: number;
  readonly now: number;
}

export interface PartDecision {
  readonly part: SealedPart;
  readonly keep: readonly KeepRange[];
  /** Rows of the part outside the keep ranges exist: the kept count needs a read. */
  readonly straddles: boolean;
  /**
   * 'insert-if-absent' when a partition of the part belongs to an epoch the chain dropped
   * (its kept rows may be a redundant copy of another epoch's rows); such parts are
   * planned apart, so that ordinary publications stay plain appends.
   */
  readonly write: PlanWrite;
}

export interface PlannerOutput {
  /** Groups of ready parts, each of one schema and within the size bound: one publication each. */
  readonly groups: readonly (readonly PartDecision[])[];
  /** Parts whose rows are not all below a landed commit yet. */
  readonly waiting: number;
  /**
   * Parts whose epoch the ownership chain lacks although it dropped nothing (its metadata
   * was replaced: an offset reset, expired group offsets): held, never guessed at. An
   * epoch a full chain dropped is not here: it is resolved (`superseded`).
   */
  readonly unresolvable: readonly {
    part: string;
    topic: string;
    partition: number;
    owner: string;
    epoch: number;
    /** The rows' topic incarnation: a deleted topic's parts are held here once Kafka dropped its chain. */
    topicId?: string;
  }[];
}

/**
 * Decides which sealed parts can be published and what of them (DESIGN.md, "Ceiling
 * rule"): a part is ready when, for each partition in it, its rows are below a
 * landed commit (an epoch still running here), or the epoch has ended (the next
 * owner's start in the chain is its ceiling) — then rows at or above the ceiling are
 * cut, the next owner re-consumed them.
 */
export function planPublications(input: PlannerInput): PlannerOutput {
  const ready: PartDecision[] = [];
  let waiting = 0;
  const unresolvable: PlannerOutput['unresolvable'][number][] = [];
  for (const part of input.parts) {
    if (input.planned.has(part.path)) continue;
    const keep: KeepRange[] = [];
    let straddles = false;
    let isReady = true;
    let held = false;
    let write: PlanWrite = 'append';
    for (const r of part.ranges) {
      const ownership = input.ownership.get(tpKey(r.topic, r.partition));
      if (!ownership) {
        isReady = false;
        break;
      }
      // Rows of another incarnation of the topic than the chain's (a deleted topic's, the
      // chain now the recreated one's): no entry of this chain bounds them, and its starts
      // (offsets of another log) must never cut them. Held, never guessed at.
      const chainTopicId = ownership.chain[ownership.chain.length - 1]?.topicId;
      const otherIncarnation =
        r.topicId !== undefined && chainTopicId !== undefined && r.topicId !== chainTopicId;
      const lookup = otherIncarnation
        ? ({ kind: 'unknown' } as const)
        : publishableRange(ownership.chain, part.epoch.owner, part.epoch.epoch, ownership.committed);
      if (lookup.kind !== 'found') {
        // First, for either kind: an epoch of this process newer than the snapshot is not
        // old; resolving it as superseded would cut all of its rows.
        if (snapshotPredatesClaim(ownership.chain, part.epoch.owner, part.epoch.epoch, input.liveOwner)) {
          isReady = false; // this process claimed the epoch after the snapshot was read: wait for a newer one
          break;
        }
      }
      if (lookup.kind === 'superseded') {
        // An epoch the chain dropped: rows below the oldest retained start, once, by key.
        write = 'insert-if-absent';
        keep.push({ topic: r.topic, partition: r.partition, from: 0, below: lookup.below });
        const inside = (r.lastOffset as number) < lookup.below;
        const outside = (r.firstOffset as number) >= lookup.below;
        if (!inside && !outside) straddles = true;
        continue;
      }
      if (lookup.kind === 'unknown') {
        unresolvable.push({
          part: part.path,
          topic: r.topic,
          partition: r.partition,
          owner: part.epoch.owner,
          epoch: part.epoch.epoch,
          ...(r.topicId === undefined ? {} : { topicId: r.topicId }),
        });
        held = true;
        break;
      }
      const moving = lookup.newest && part.epoch.owner === input.liveOwner;
      // Commit after published: a running epoch's commit follows its publications, so
      // its sealed rows go now, all of them (a late one racing the next owner's copy is
      // inserted only if absent: DESIGN.md, "Commit after published").
      const ceiling = moving && input.commitAfter === 'published' ? UNBOUNDED : lookup.ceiling;
      if (moving && ceiling !== UNBOUNDED && (r.lastOffset as number) >= ownership.committed) {
        isReady = false; // not all rows committed yet
        break;
      }
      if (nearChainEnd(ownership.chain, part.epoch.owner, part.epoch.epoch, input.liveOwner))
        write = 'insert-if-absent'; // its epoch is close to being dropped: see nearChainEnd
      keep.push({ topic: r.topic, partition: r.partition, from: lookup.start, below: ceiling });
      const inside = (r.firstOffset as number) >= lookup.start && (r.lastOffset as number) < ceiling;
      const outside = (r.lastOffset as number) < lookup.start || (r.firstOffset as number) >= ceiling;
      if (!inside && !outside) straddles = true;
    }
    if (held) continue; // reported once, as unresolvable, not also as waiting
    if (isReady) ready.push({ part, keep, straddles, write });
    else waiting += 1;
  }

  // One schema and one write mode per publication; parts in name order (schema, minute, ULID).
  const bySchema = new Map<string, PartDecision[]>();
  for (const d of ready.sort((a, b) =>
    path.basename(a.part.path).localeCompare(path.basename(b.part.path)),
  )) {
    const key = `${d.part.schemaKey}/${d.write}`;
    const list = bySchema.get(key) ?? [];
    list.push(d);
    bySchema.set(key, list);
  }
  const groups: PartDecision[][] = [];
  for (const decisions of bySchema.values()) {
    let current: PartDecision[] = [];
    let bytes = 0;
    for (const d of decisions) {
      if (current.length > 0 && bytes + d.part.bytes > input.maxPublicationBytes) {
        groups.push(current);
        current = [];
        bytes = 0;
      }
      current.push(d);
      bytes += d.part.bytes;
    }
    if (current.length === 0) continue;
    // A small last group waits a little for company, bounded by maxPublicationDelayMs.
    const oldest = Math.min(...current.map((d) => partCreatedAt(d.part.path)));
    if (bytes >= input.maxPublicationBytes || input.now - oldest >= input.maxPublicationDelayMs)
      groups.push(current);
    else waiting += current.length;
  }
  return { groups, waiting, unresolvable };
}

/** The keep range of a running epoch in 'published' mode has no upper end. */
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

/**
 * A part of this live process whose epoch is newer than every entry of ours in the
 * chain: the snapshot was read before the epoch's claim landed. Not unresolvable.
 */
function snapshotPredatesClaim(
  chain: readonly ChainEntry[],
  owner: string,
  epoch: number,
  liveOwner: string,
): boolean {
  return owner === liveOwner && chain.every((e) => e.owner !== owner || e.epoch < epoch);
}

/** When a part was opened: the time in its ULID. */
function partCreatedAt(file: string): number {
  const id = parsePartName(path.basename(file))?.id.slice(0, 26);
  return id ? decodeTime(id) : 0;
}

export function toPlanPart(d: PartDecision, keptRows: number): PlanPart {
  return {
    path: d.part.path,
    bytes: d.part.bytes,
    checksum: d.part.checksum,
    epoch: d.part.epoch,
    rows: d.part.rows,
    keptRows,
    ranges: d.part.ranges,
    keep: d.keep,
  };
}

/** Rows of a range kept when it lies wholly inside or outside its keep range. */
export function keptRowsWithoutReading(d: PartDecision): number {
  return keptRowsOfRanges(d.part.ranges, d.keep);
}

/**
 * A plan written as an append whose epochs have since dropped out of a full chain, or
 * come close (a replica back after many rebalances with plans in its ledger): published
 * insert-if-absent, since a dropped epoch's plan of another replica may hold a redundant
 * copy of its rows (DESIGN.md, "Scale-down and old epochs"). Decided anew at every
 * attempt from the current snapshot; the plan file is not rewritten.
 */
export function withAgedEpochs(
  entry: LedgerEntry,
  ownership: ReadonlyMap<TopicPartitionKey, PartitionOwnership>,
  liveOwner: string,
): LedgerEntry {
  const { plan } = entry;
  if (!plan || plan.write === 'insert-if-absent') return entry;
  const aged = plan.parts.some((part) =>
    part.ranges.some((r) => {
      const partition = ownership.get(tpKey(r.topic, r.partition));
      return (
        partition !== undefined &&
        nearChainEnd(partition.chain, part.epoch.owner, part.epoch.epoch, liveOwner)
      );
    }),
  );
  return aged ? { ...entry, plan: { ...plan, write: 'insert-if-absent' } } : entry;
}
