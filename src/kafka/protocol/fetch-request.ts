import type { AnsweredPartition } from './fetched-batch';

/** A Fetch request as kafkajs 2.2.4's Broker takes it. */
export interface FetchRequest {
  readonly maxWaitTime?: number;
  readonly minBytes?: number;
  readonly maxBytes?: number;
  readonly topics: readonly {
    readonly topic: string;
    readonly partitions: readonly {
      readonly partition: number;
      readonly fetchOffset: string;
      readonly maxBytes?: number;
    }[];
  }[];
}
/** Its answer, as kafkajs 2.2.4 decodes it. */
export interface FetchResponse {
  readonly responses: readonly {
    readonly topicName: string;
    readonly partitions: readonly AnsweredPartition[];
  }[];
}
