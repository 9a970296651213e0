import type { Admin, Kafka } from 'kafkajs';
import type { PreviousMember } from './previous-member';
import type { Logger } from '../common/logger';
import type { ResolvedConsumer } from '../config';
import type { DeadLetterSink } from '../dead-letters/dead-letter';
import type { Metrics } from '../metrics/metrics';
import { CommitFence } from '../ownership/commit-fence';
import { GroupMembership } from '../ownership/membership';
import type { OffsetTracker } from '../ownership/offset-tracker';
import { PublicationGate } from '../ownership/publication-gate';
import type { StagingPool } from '../pool/staging-pool';
import type { SchemaSource } from '../schema-registry/schema-source';
import type { DiskPressure } from '../common/disk-pressure';
import { PartitionOffsets } from './partition-offsets';
import { TopicIds } from './protocol/topic-ids';
import type { IngestionCounts } from './ingestion-events';

export interface IngestionOptions {
  readonly consumer: ResolvedConsumer;
  readonly kafka: Kafka;
  readonly admin: Admin;
  readonly pool: StagingPool;
  /** Decides every commit; staging's batch reports reach it too (staged-batch-reports.ts). */
  readonly tracker: OffsetTracker;
  readonly deadLetters: DeadLetterSink;
  /** This process instance: the owner recorded in parts and in the ownership chain. */
  readonly owner: string;
  readonly logger: Logger;
  /** The epoch the pool's staging starts in (before the first join). */
  readonly initialEpoch: number;
  readonly metrics: Metrics;
  /** The table's staging directory ('published' commits wait for its parts to be published). */
  readonly tableDir: string;
  /** Full disks of this process: consumption pauses while any is full. */
  readonly diskPressure: DiskPressure;
  /** Registry formats: fetches the writer schemas of each batch before it goes to staging. */
  readonly schemas?: SchemaSource;
  /** Records each join in the data directory, so that a start after a crash can leave as this member. */
  readonly previousMember?: PreviousMember;
}

export interface IngestionStats extends IngestionCounts {
  readonly deadLetters: number;
}

/**
 * The ownership rules the roles of the ingestion (the join's claims, the fetch positions,
 * the batch runner, the durability tick and the commits) consult (tracker, membership,
 * fence, gate), the broker reads, and the work running on after a batch. One instance
 * per Ingestion, which hands each role only the parts it names in its own deps.
 */
export class IngestionState {
  readonly options: IngestionOptions;
  readonly tracker: OffsetTracker;
  readonly membership = new GroupMembership();
  readonly fence: CommitFence;
  readonly offsets: PartitionOffsets;
  /** Topic incarnations (Kafka topic ids): claimed with each partition, stamped on its rows. */
  readonly topicIds: TopicIds;
  /** offsets.commitAfter 'published': holds each commit until the parts below it are published. */
  readonly gate: PublicationGate | undefined;
  readonly #inFlight = new Set<Promise<unknown>>();
  #fatal: ((error: Error) => void) | undefined;

  constructor(options: IngestionOptions) {
    this.options = options;
    this.tracker = options.tracker;
    this.gate = options.consumer.offsets.commitAfter === 'published' ? new PublicationGate() : undefined;
    this.fence = new CommitFence(this.membership, options.consumer.groupId);
    this.offsets = new PartitionOffsets(options.kafka, options.admin, options.consumer.groupId);
    this.topicIds = new TopicIds(options.kafka, options.logger);
  }

  /** Where an error the replica cannot go on after is reported (given at start). */
  onFatal(report: (error: Error) => void): void {
    this.#fatal = report;
  }

  fail(error: unknown): void {
    this.#fatal?.(error instanceof Error ? error : new Error(String(error)));
  }

  /** Work that runs on after its batch left eachBatch: a stop waits for it; its failure is fatal unless `ignore` says otherwise. */
  track(work: Promise<unknown>, ignore: (error: unknown) => boolean = () => false): void {
    this.#inFlight.add(work);
    void work
      .catch((error: unknown) => {
        if (!ignore(error)) this.fail(error);
      })
      .finally(() => this.#inFlight.delete(work));
  }

  /** Settles when every tracked work has. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#inFlight]);
  }
}
