import type { FetchRequest, FetchResponse } from './coordinator-hook';

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
  /** Per topic and partition, its place: lower is asked first. */
  readonly #places = new Map<string, Map<number, number>>();
  #next = 0;

  /** The request's partitions in this order, consecutive partitions of a topic as one entry. */
  order(topics: FetchRequest['topics']): FetchTopic[] {
    const asked: { topic: FetchTopic; partition: FetchPartition; place: number }[] = [];
    const unplaced: { topic: FetchTopic; partition: FetchPartition }[] = [];
    for (const topic of topics) {
      const places = this.#places.get(topic.topic);
      for (const partition of topic.partitions) {
        const place = places?.get(partition.partition);
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

  /** The partitions that returned records go to the back, in the order the broker answered them. */
  answered(answer: FetchResponse): void {
    for (const { topicName, partitions } of answer.responses)
      for (const { partition, messages } of partitions)
        if (messages !== undefined && messages.length > 0) this.#moveToBack(topicName, partition);
  }

  #moveToBack(topic: string, partition: number): number {
    let places = this.#places.get(topic);
    if (places === undefined) this.#places.set(topic, (places = new Map<number, number>()));
    const place = this.#next++;
    places.set(partition, place);
    return place;
  }
}
