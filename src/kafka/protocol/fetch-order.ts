import type { AnsweredPartition } from './fetched-batch';
import type { FetchRequest, FetchResponse } from './fetch-request';

type FetchTopic = FetchRequest['topics'][number];
type FetchPartition = FetchTopic['partitions'][number];

/**
 * The order a consumer asks a broker for its partitions, as the Java consumer keeps it:
 * a partition that returned records goes to the back, one that returned nothing stays
 * in front, and partitions first seen join at the back grouped by topic.
 *
 * A broker fills a fetch's answer in the order asked until its size limit, and returns a
 * batch over the limits only for the first partition that has one (KIP-74). Every
 * partition with records therefore reaches the front and is answered in turn: nothing
 * starves, and a quiet partition is asked first the moment it holds a record.
 *
 * kafkajs 2.2.4 shuffles each fetch instead. With a pattern over 200 topics of 3
 * partitions routed to 200 tables, a backlog then reached each table as three lumps
 * seconds apart (a topic's partitions in three random fetches), each its own staging part
 * and Lance publication. Here a topic's partitions stay next to each other, so a table's
 * backlog comes in one fetch, or two in a row (bench/many-tables-levers.md).
 */
export class FetchOrder {
  /** Per topic, its partitions' places (lower is asked first) and the last fetch that asked for it. */
  readonly #places = new Map<string, { readonly partitions: Map<number, number>; asked: number }>();
  #next = 0;
  #fetches = 0;

  /** The request's partitions in this order, consecutive partitions of a topic as one entry. */
  order(topics: FetchRequest['topics']): FetchTopic[] {
    this.#forgetUnasked();
    const asked: { topic: FetchTopic; partition: FetchPartition; place: number }[] = [];
    const unplaced: { topic: FetchTopic; partition: FetchPartition }[] = [];
    for (const topic of topics) {
      const places = this.#places.get(topic.topic);
      if (places !== undefined) places.asked = this.#fetches;
      for (const partition of topic.partitions) {
        const place = places?.partitions.get(partition.partition);
        if (place === undefined) unplaced.push({ topic, partition });
        else asked.push({ topic, partition, place });
      }
    }
    unplaced.sort(
      (a, b) =>
        (a.topic.topic < b.topic.topic ? -1 : a.topic.topic > b.topic.topic ? 1 : 0) ||
        a.partition.partition - b.partition.partition,
    );
    for (const { topic, partition } of unplaced)
      asked.push({ topic, partition, place: this.#moveToBack(topic.topic, partition.partition) });
    asked.sort((a, b) => a.place - b.place);

    const ordered: FetchTopic[] = [];
    let last: { topic: FetchTopic; partitions: FetchPartition[] } | undefined;
    for (const { topic, partition } of asked) {
      if (last?.topic.topic === topic.topic) {
        last.partitions.push(partition);
        continue;
      }
      last = { topic, partitions: [partition] };
      ordered.push({ ...topic, partitions: last.partitions });
    }
    return ordered;
  }

  /**
   * After `request` was answered: the partitions that returned records go to the back, in
   * the order the broker answered them, and so does the first one that had records to give
   * (its fetch offset below the log end the broker reported) even if none was decoded. The
   * broker answers that one over the limits (KIP-74), and kafkajs can decode its bytes into
   * no record (a record batch the log cleaner left empty, followed by one cut at the size
   * limit): left in front, it would take every fetch's bytes again. A partition with nothing
   * to give (caught up) keeps its place.
   */
  answered(request: FetchRequest, answer: FetchResponse): void {
    const returned = new Map<string, Map<number, AnsweredPartition>>();
    for (const { topicName, partitions } of answer.responses) {
      const byPartition = returned.get(topicName) ?? new Map<number, AnsweredPartition>();
      for (const data of partitions) byPartition.set(data.partition, data);
      returned.set(topicName, byPartition);
    }
    let servedFirst = false;
    for (const { topic, partitions } of request.topics)
      for (const { partition, fetchOffset } of partitions) {
        const data = returned.get(topic)?.get(partition);
        if (data === undefined) continue;
        const hadRecords = data.messages !== undefined && data.messages.length > 0;
        const first = !servedFirst && (hadRecords || below(fetchOffset, data.highWatermark));
        if (first) servedFirst = true;
        if (hadRecords || first) this.#moveToBack(topic, partition);
      }
  }

  #moveToBack(topic: string, partition: number): number {
    let places = this.#places.get(topic);
    if (places === undefined)
      this.#places.set(topic, (places = { partitions: new Map(), asked: this.#fetches }));
    const place = this.#next++;
    places.partitions.set(partition, place);
    return place;
  }

  /**
   * Every FORGET_AFTER_FETCHES fetches, the topics no fetch asked for since are let go (deleted,
   * revoked, or long paused: asked again, they join at the back): a pattern subscription's
   * topics come and go, and the consumer's client lives as long as the replica.
   */
  #forgetUnasked(): void {
    this.#fetches += 1;
    if (this.#fetches % FORGET_AFTER_FETCHES !== 0) return;
    for (const [topic, places] of this.#places)
      if (this.#fetches - places.asked >= FORGET_AFTER_FETCHES) this.#places.delete(topic);
  }
}

const FORGET_AFTER_FETCHES = 1000;

/** Whether the offset `at` lies below the log end `end` (both as Kafka's decimal strings). */
function below(at: string, end: string | undefined): boolean {
  if (end === undefined) return true;
  try {
    return BigInt(at) < BigInt(end);
  } catch {
    return true;
  }
}
