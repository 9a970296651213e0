import { NOTHING_DURABLE, tpKey, type DurableOffset, type TopicPartitionKey } from '../common/offsets';

/**
 * A table staging's two thresholds per partition: the highest offset handed to it
 * (pushed: records at or below are redeliveries, skipped) and the highest offset durable
 * (reported by sync). A revoke lowers both, an assignment raises both; durability never
 * passes what is pushed.
 */
export class HighWaters {
  /** Highest offset handed to staging per partition (the redelivery threshold). */
  readonly #pushed = new Map<TopicPartitionKey, DurableOffset>();
  /** Highest offset durable per partition: reported by sync(). */
  readonly #durable = new Map<TopicPartitionKey, DurableOffset>();
  /**
   * The last copies handed out, kept while nothing changed: a routing lane's tables each
   * follow every claimed partition, and copying hundreds of entries per table per
   * durability tick, for tables that staged nothing since, was a tenth of the staging
   * thread's time with 200 tables (bench/many-tables.md).
   */
  #pushedCopy: ReadonlyMap<TopicPartitionKey, DurableOffset> | undefined;
  #durableCopy: ReadonlyMap<TopicPartitionKey, DurableOffset> | undefined;
  /** The snapshot last made durable: the same one again changes nothing. */
  #applied: ReadonlyMap<TopicPartitionKey, DurableOffset> | undefined;

  pushedThrough(topic: string, partition: number): DurableOffset {
    return this.#pushed.get(tpKey(topic, partition)) ?? NOTHING_DURABLE;
  }

  pushed(topic: string, partition: number, through: DurableOffset): void {
    this.#pushed.set(tpKey(topic, partition), through);
    this.#pushedCopy = undefined;
  }

  /** What is pushed now: it becomes durable once the writers holding it have written and fsynced. */
  pushedSnapshot(): ReadonlyMap<TopicPartitionKey, DurableOffset> {
    return (this.#pushedCopy ??= new Map(this.#pushed));
  }

  /** A snapshot taken before a sync is durable now. */
  durable(snapshot: ReadonlyMap<TopicPartitionKey, DurableOffset>): void {
    // Every change to either map drops the copies, so the same snapshot again finds nothing to raise.
    if (snapshot === this.#applied) return;
    for (const [key, offset] of snapshot) {
      // A revoke may have lowered the high-water while we were syncing: never raise past it.
      const ceiling = this.#pushed.get(key) ?? NOTHING_DURABLE;
      const next = Math.min(offset, ceiling) as DurableOffset;
      if (next > (this.#durable.get(key) ?? NOTHING_DURABLE)) {
        this.#durable.set(key, next);
        this.#durableCopy = undefined;
      }
    }
    this.#applied = snapshot;
  }

  lower(topic: string, partition: number, ceiling: DurableOffset): void {
    const key = tpKey(topic, partition);
    for (const map of [this.#pushed, this.#durable]) {
      if ((map.get(key) ?? NOTHING_DURABLE) > ceiling) map.set(key, ceiling);
    }
    this.#changed();
  }

  raise(topic: string, partition: number, offset: DurableOffset): void {
    const key = tpKey(topic, partition);
    for (const map of [this.#pushed, this.#durable]) {
      if ((map.get(key) ?? NOTHING_DURABLE) < offset) map.set(key, offset);
    }
    this.#changed();
  }

  durableOffsets(): ReadonlyMap<TopicPartitionKey, DurableOffset> {
    return (this.#durableCopy ??= new Map(this.#durable));
  }

  #changed(): void {
    this.#pushedCopy = undefined;
    this.#durableCopy = undefined;
    this.#applied = undefined;
  }
}
