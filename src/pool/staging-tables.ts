import { DiskFullError } from '../common/errors';
import { tpKey, type DurableOffset, type TopicPartitionKey } from '../common/offsets';
import type { Logger } from '../common/logger';
import type { ResolvedConsumer } from '../config';
import { RecordDecoder, type KnownField } from '../decode/record-decoder';
import { FileLocks } from '../staging/file-locks';
import type { StagingEpoch } from '../staging/epoch';
import { OpenPartLimit } from '../staging/open-parts';
import type { PartWriter } from '../staging/part-writer';
import { TableStaging, tableStagingDir, type FlushResult } from '../staging/table-staging';
import type { PartitionOffset } from './protocol';
import { TableDurability } from './table-durability';

/** One table of a lane: its decoder (its own inferred columns) and its staging (its own parts). */
export interface StagedTable {
  readonly decoder: RecordDecoder;
  readonly staging: TableStaging;
}

/** What a table's decoder starts from: the existing Lance table's columns and `_key` type. */
export interface TableSeeds {
  readonly knownFields: readonly KnownField[];
  readonly tableKeyType?: string;
}

export interface StagingTablesOptions {
  readonly consumer: ResolvedConsumer;
  readonly dataDir: string;
  /** Names the lane in file locks and logs. */
  readonly owner: string;
  readonly logger: Logger;
  readonly epoch: StagingEpoch;
  readonly maxPartBytes: number;
  readonly maxPartAgeMs: number;
  /** The lane's open-part bound, over all its tables. */
  readonly maxOpenParts: number;
  /** Read when a table is first seen (routing consumers: its Lance table, if it exists). */
  readonly seedsOf: (table: string) => Promise<TableSeeds>;
}

/**
 * The tables of one staging lane of a routing consumer (a `{topic}` template or a
 * `route`): each opened on first sight in its own directory `<dataDir>/staging/<table>/`,
 * all in the lane's current epoch, sharing the lane's bound on open part files. Epoch
 * changes, high-water changes, syncs, flushes and the close reach every table; durable
 * offsets are merged across them (table-durability.ts).
 */
export class StagingTables {
  readonly #options: StagingTablesOptions;
  readonly #tables = new Map<string, StagedTable>();
  /** Tables being opened (a seed read, a directory made): one open per name. */
  readonly #opening = new Map<string, Promise<StagedTable>>();
  readonly #locks = new FileLocks();
  readonly #openParts: OpenPartLimit<PartWriter>;
  readonly durability = new TableDurability();
  /**
   * Per claimed partition, the highest offset the lane has handled this epoch (from the
   * claim's start - 1): a record at or below it is a redelivery, skipped before it is
   * routed (a route could send it elsewhere the second time). The tables' own thresholds
   * only ever trail it.
   */
  readonly #handled = new Map<TopicPartitionKey, DurableOffset>();
  #epoch: StagingEpoch;

  constructor(options: StagingTablesOptions) {
    this.#options = options;
    this.#epoch = options.epoch;
    // One bound for the lane: 200 tables must not open 200 × maxOpenParts files.
    this.#openParts = new OpenPartLimit<PartWriter>(options.maxOpenParts, () => this.#relievePressure());
  }

  /**
   * Parts wait for a file slot: the lane's oldest open parts holding one are sealed (a
   * quiet table's part goes before a busy one's newer part, which keeps filling) until
   * the slots being released cover the waiting parts. Otherwise a waiting part could wait
   * on open parts that seal only at a flush, which comes only after the sync it holds up.
   */
  #relievePressure(): void {
    let releasing = 0;
    for (const writer of this.#openParts.holders()) if (writer.state !== 'open') releasing += 1;
    while (releasing < this.#openParts.waiting && this.#sealOldest(true)) releasing += 1;
  }

  /** Before a table opens a part: at the bound, the lane's oldest open part is sealed (as one table does alone). */
  #makeRoom(): void {
    let open = 0;
    for (const { staging } of this.#tables.values()) open += staging.openPartCount;
    if (open >= this.#openParts.max) this.#sealOldest(false);
  }

  #sealOldest(holdingSlot: boolean): boolean {
    let oldest: { staging: TableStaging; since: number } | undefined;
    for (const { staging } of this.#tables.values()) {
      const since = staging.oldestOpenPartSince(holdingSlot);
      if (since !== undefined && (oldest === undefined || since < oldest.since)) oldest = { staging, since };
    }
    return oldest?.staging.sealOldestOpenPart(holdingSlot) ?? false;
  }

  get maxTables(): number {
    return this.#options.consumer.staging.maxTables;
  }

  get epoch(): StagingEpoch {
    return this.#epoch;
  }

  all(): StagedTable[] {
    return [...this.#tables.values()];
  }

  get(table: string): StagedTable | undefined {
    return this.#tables.get(table);
  }

  /**
   * Of the tables a batch names, those beyond the lane's bound (staging.maxTables): not
   * staged yet, with no room left for them (the first named, first admitted).
   */
  beyondBound(names: Iterable<string>): Set<string> {
    let room = this.#options.consumer.staging.maxTables - this.#tables.size;
    const beyond = new Set<string>();
    for (const name of names) {
      if (this.#tables.has(name)) continue;
      if (room > 0) room -= 1;
      else beyond.add(name);
    }
    return beyond;
  }

  /** The table, opened on its first sight. */
  open(table: string): Promise<StagedTable> {
    const known = this.#tables.get(table);
    if (known) return Promise.resolve(known);
    let opening = this.#opening.get(table);
    if (!opening) {
      opening = this.#openTable(table).finally(() => this.#opening.delete(table));
      this.#opening.set(table, opening);
    }
    return opening;
  }

  async #openTable(table: string): Promise<StagedTable> {
    const o = this.#options;
    const seeds = await o.seedsOf(table);
    const decoder = new RecordDecoder({
      ...o.consumer,
      knownFields: seeds.knownFields,
      ...(seeds.tableKeyType === undefined ? {} : { tableKeyType: seeds.tableKeyType }),
    });
    const staging = await TableStaging.open({
      tableDir: tableStagingDir(o.dataDir, table),
      table,
      locks: this.#locks,
      owner: o.owner,
      logger: o.logger,
      maxPartBytes: o.maxPartBytes,
      maxPartAgeMs: o.maxPartAgeMs,
      sharedOpenParts: this.#openParts,
      makeRoom: () => this.#makeRoom(),
      // The epoch may have changed while the seeds were read: the current one. No high-waters:
      // a table follows a partition from the first batch it is given (table-durability.ts),
      // and the lane has dropped every redelivery before routing; 200 tables each holding
      // every claimed partition's four offsets were a third of the main thread's heap.
      epoch: this.#epoch,
    });
    const staged = { decoder, staging };
    this.#tables.set(table, staged);
    o.logger.info({ event: 'staging.table.opened', table }, `staging table ${table}`);
    return staged;
  }

  /** The highest offset of the partition the lane has handled (records at or below it are redeliveries). */
  handledThrough(topic: string, partition: number): DurableOffset | undefined {
    return this.#handled.get(tpKey(topic, partition));
  }

  /** A batch of the partition was staged in full, through `through`. */
  handled(topic: string, partition: number, through: DurableOffset): void {
    const key = tpKey(topic, partition);
    if ((this.#handled.get(key) ?? -1) < through) this.#handled.set(key, through);
  }

  /** A new epoch for every table: revoked partitions drop to their ceiling, claimed ones start at their claim. */
  async beginEpoch(
    epoch: StagingEpoch,
    revoked: readonly PartitionOffset[],
    assigned: readonly PartitionOffset[],
  ): Promise<FlushResult> {
    this.#epoch = epoch;
    for (const [topic, partition, ceiling] of revoked) {
      this.#handled.delete(tpKey(topic, partition));
      this.durability.lower(topic, partition, ceiling as DurableOffset);
    }
    for (const [topic, partition, offset] of assigned) {
      this.#handled.set(tpKey(topic, partition), offset as DurableOffset);
      this.durability.lower(topic, partition, offset as DurableOffset);
    }
    // Only the tables that follow a partition hold its high-waters.
    for (const [topic, partition, ceiling] of revoked) {
      for (const table of this.durability.tablesOf(topic, partition))
        this.#tables.get(table)?.staging.lowerHighWater(topic, partition, ceiling as DurableOffset);
    }
    for (const [topic, partition, offset] of assigned) {
      for (const table of this.durability.tablesOf(topic, partition)) {
        const staging = this.#tables.get(table)?.staging;
        staging?.lowerHighWater(topic, partition, offset as DurableOffset);
        staging?.raiseHighWater(topic, partition, offset as DurableOffset);
      }
    }
    return this.#every((staging) => staging.beginEpoch(epoch));
  }

  /**
   * Every table's durability tick, snapshots taken at the same moment (each sync takes
   * its snapshot before its first await). A full disk anywhere is reported as such
   * (retried); any other failure first.
   */
  async sync(): Promise<ReadonlyMap<TopicPartitionKey, DurableOffset>> {
    const tables = [...this.#tables];
    const results = await Promise.allSettled(tables.map(([, t]) => t.staging.sync()));
    const durable = new Map<string, ReadonlyMap<TopicPartitionKey, DurableOffset>>();
    throwFirstFailure(results);
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') durable.set(tables[i]![0], r.value);
    });
    return this.durability.merge(durable);
  }

  flush(force: boolean): Promise<FlushResult> {
    return this.#every((staging) => staging.flush({ force }));
  }

  close(): Promise<FlushResult> {
    return this.#every((staging) => staging.close());
  }

  stats(): { openParts: number; sealingParts: number } {
    let openParts = 0;
    let sealingParts = 0;
    for (const { staging } of this.#tables.values()) {
      const s = staging.stats();
      openParts += s.openParts;
      sealingParts += s.sealingParts;
    }
    return { openParts, sealingParts };
  }

  unsealedPartIds(): string[] {
    return [...this.#tables.values()].flatMap(({ staging }) => staging.unsealedPartIds());
  }

  async #every(step: (staging: TableStaging) => Promise<FlushResult>): Promise<FlushResult> {
    const results = await Promise.allSettled([...this.#tables.values()].map(({ staging }) => step(staging)));
    throwFirstFailure(results);
    return { sealed: results.flatMap((r) => (r.status === 'fulfilled' ? r.value.sealed : [])) };
  }
}

/** A failure other than a full disk wins (staging failed); a full disk alone is retriable. */
function throwFirstFailure(results: readonly PromiseSettledResult<unknown>[]): void {
  const failures = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
  if (failures.length === 0) return;
  throw failures.find((e) => !(e instanceof DiskFullError)) ?? failures[0];
}
