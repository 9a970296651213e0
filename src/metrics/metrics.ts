import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { DEFAULT_MAX_TABLE_LABELS } from '../config/metrics-options';
import { TableLabels } from './table-labels';

/**
 * Every metric kafka-lance exports, in one registry owned by the main thread.
 * Values observed in workers reach it as reports (counters as deltas, histograms as
 * observations), so nothing observed off the main thread is lost. The names are a
 * contract: the Grafana dashboard and the alert rules are checked against them.
 */
export class Metrics {
  readonly registry = new Registry();
  /** Every per-table family's `table` value goes through this bound (table-labels.ts). */
  readonly tableLabels = new TableLabels(DEFAULT_MAX_TABLE_LABELS);

  readonly sourceWait = new Histogram({
    name: 'kafka_lance_source_wait_seconds',
    help: 'Seconds a Lance writer waited for source data (prepared batches) per publication.',
    labelNames: ['table', 'mode'] as const,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly permitsInUse = new Gauge({
    name: 'kafka_lance_permits_in_use',
    help: 'Fetch or decode permits held by preparation tasks (count).',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly permitsCapacity = new Gauge({
    name: 'kafka_lance_permits_capacity',
    help: 'Fetch or decode permits available in this process (count).',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly permitWait = new Histogram({
    name: 'kafka_lance_permit_wait_seconds',
    help: 'Seconds a preparation task waited for a fetch or decode permit.',
    labelNames: ['kind'] as const,
    buckets: [0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
    registers: [this.registry],
  });
  readonly reservationBytes = new Gauge({
    name: 'kafka_lance_source_reservation_bytes',
    help: 'Bytes of fetched and decoded source data reserved by publications.',
    registers: [this.registry],
  });
  readonly reservationLimit = new Gauge({
    name: 'kafka_lance_source_reservation_limit_bytes',
    help: 'Limit of the source reservation in bytes.',
    registers: [this.registry],
  });
  readonly consumedRecords = new Counter({
    name: 'kafka_lance_consumed_records_total',
    help: 'Records fetched from Kafka and handed to staging.',
    labelNames: ['topic'] as const,
    registers: [this.registry],
  });
  readonly consumedBytes = new Counter({
    name: 'kafka_lance_consumed_bytes_total',
    help: 'Bytes of keys and values fetched from Kafka and handed to staging.',
    labelNames: ['topic'] as const,
    registers: [this.registry],
  });
  readonly stagedRecords = new Counter({
    name: 'kafka_lance_staged_records_total',
    help: 'Rows appended to staging parts (redeliveries skipped are not counted).',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });
  readonly stagedBytes = new Counter({
    name: 'kafka_lance_staged_bytes_total',
    help: 'Bytes of Arrow data appended to staging parts.',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });
  readonly publishedRecords = new Counter({
    name: 'kafka_lance_published_records_total',
    help: 'Rows committed to Lance.',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });
  readonly upsertedRows = new Counter({
    name: 'kafka_lance_upserted_rows_total',
    help: 'Upsert tables: keys whose newest record in a publication was a value, merged into Lance (a replay or an older position changes nothing but is counted).',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });
  readonly deletedRows = new Counter({
    name: 'kafka_lance_deleted_rows_total',
    help: 'Upsert tables: keys whose newest record in a publication was a delete (a tombstone), merged into Lance as a _deleted row.',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });
  readonly mergedRows = new Counter({
    name: 'kafka_lance_merged_rows_total',
    help: 'Upsert tables: rows the merges changed, by change (inserted: a key new to the table; updated: a newer position replaced a key’s row).',
    labelNames: ['table', 'change'] as const,
    registers: [this.registry],
  });
  readonly mergeDuration = new Histogram({
    name: 'kafka_lance_merge_duration_seconds',
    help: 'Upsert tables: seconds per publication merge (the Lance merge-insert, conflict retries included).',
    labelNames: ['table'] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly publishedBytes = new Counter({
    name: 'kafka_lance_published_bytes_total',
    help: 'Bytes of staged parts published into Lance.',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });
  readonly publications = new Counter({
    name: 'kafka_lance_publications_total',
    help: 'Publications into Lance by result (success or failure; failures are retried).',
    labelNames: ['table', 'result'] as const,
    registers: [this.registry],
  });
  readonly publicationFailures = new Counter({
    name: 'kafka_lance_publication_failures_total',
    help: 'Failed publication attempts by reason (storage: retried; schema-incompatible, invalid-column-name, part-corrupt, source-missing, plan-mismatch: set aside after a bounded number of attempts).',
    labelNames: ['table', 'reason'] as const,
    registers: [this.registry],
  });
  readonly quarantinedParts = new Counter({
    name: 'kafka_lance_quarantined_parts_total',
    help: 'Staging parts moved to the quarantine (kept for a human, never published), by reason.',
    labelNames: ['table', 'reason'] as const,
    registers: [this.registry],
  });
  readonly publicationDuration = new Histogram({
    name: 'kafka_lance_publication_duration_seconds',
    help: 'Seconds per publication phase: prepare (fetch + decode) and write (Lance add and ledger).',
    labelNames: ['table', 'phase'] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly committedOffset = new Gauge({
    name: 'kafka_lance_committed_offset',
    help: 'Last offset commit that landed, per partition owned by this replica (next offset to consume).',
    labelNames: ['topic', 'partition'] as const,
    registers: [this.registry],
  });
  readonly consumerLag = new Gauge({
    name: 'kafka_lance_consumer_lag',
    help: 'Records between the log end and the committed offset, per partition owned by this replica.',
    labelNames: ['topic', 'partition'] as const,
    registers: [this.registry],
  });
  readonly offsetsLost = new Counter({
    name: 'kafka_lance_offsets_lost_total',
    help: 'Offsets the log no longer held when this group reached them (retention or deleteRecords moved the log start past the committed position): records nobody read.',
    labelNames: ['topic', 'partition'] as const,
    registers: [this.registry],
  });
  readonly offsetsAheadOfLog = new Gauge({
    name: 'kafka_lance_offsets_ahead_of_log',
    help: "Offsets by which a partition's position is beyond its log end (the log was truncated below what this group consumed); the partition waits while it is not 0.",
    labelNames: ['topic', 'partition'] as const,
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({
    name: 'kafka_lance_queue_depth',
    help: 'Items in a bounded queue (queue="staging": records; "staging_bytes": bytes).',
    labelNames: ['queue'] as const,
    registers: [this.registry],
  });
  readonly queueCapacity = new Gauge({
    name: 'kafka_lance_queue_capacity',
    help: 'Capacity of a bounded queue, in the unit of kafka_lance_queue_depth.',
    labelNames: ['queue'] as const,
    registers: [this.registry],
  });
  readonly deadLetters = new Counter({
    name: 'kafka_lance_dead_letter_records_total',
    help: 'Records written to the dead-letter output, by reason.',
    labelNames: ['topic', 'reason'] as const,
    registers: [this.registry],
  });
  readonly partitionStopped = new Gauge({
    name: 'kafka_lance_partition_stopped',
    help: 'Partitions this replica stopped consuming (1) until it restarts: a dead letter could not be written, too many records were dead letters, or a compressed record batch is corrupt.',
    labelNames: ['topic', 'partition', 'reason'] as const,
    registers: [this.registry],
  });
  readonly brokerAuthenticationFailing = new Gauge({
    name: 'kafka_lance_broker_authentication_failing',
    help: "The broker refuses this running replica's credentials or TLS (1; credentials rotated on the broker, a revoked certificate): it retries, keeps what it staged, and commits nothing until it joins again.",
    registers: [this.registry],
  });
  readonly brokerAuthenticationFailures = new Counter({
    name: 'kafka_lance_broker_authentication_failures_total',
    help: "Times a running replica's consumer was refused by the broker for its credentials or TLS; each is retried.",
    registers: [this.registry],
  });
  readonly consumerRestarts = new Counter({
    name: 'kafka_lance_consumer_restarts_total',
    help: 'Times this replica started its crashed Kafka consumer again, by reason: retriable_error (a closed connection, retries exhausted), broker_unavailable (no broker named the group coordinator) or authentication_refused. Staged records are kept; nothing is committed until it joins again.',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly consumerStopped = new Gauge({
    name: 'kafka_lance_consumer_stopped',
    help: "This replica's Kafka consumer crashed and is not back in its group yet (1): a broker connection failed, the cluster is out of reach, or it refuses the credentials. It fetches and commits nothing until it joins again.",
    registers: [this.registry],
  });
  readonly schemaRegistryUnreachable = new Gauge({
    name: 'kafka_lance_schema_registry_unreachable',
    help: 'The Schema Registry cannot be reached (1): records of registry formats wait for it, none is dead-lettered for it.',
    registers: [this.registry],
  });
  readonly schemaRegistryErrors = new Counter({
    name: 'kafka_lance_schema_registry_errors_total',
    help: 'Schema Registry requests that failed (unreachable, timed out, or an answer that is not a schema); each is retried.',
    registers: [this.registry],
  });
  readonly diskFull = new Gauge({
    name: 'kafka_lance_disk_full',
    help: 'A write met a full disk or a spent quota (1) on the staging file system or the Lance table: consumption is paused until space returns.',
    labelNames: ['stage'] as const,
    registers: [this.registry],
  });
  readonly stagingParts = new Gauge({
    name: 'kafka_lance_staging_parts',
    help: 'Staging parts by state: open (appended to), sealing, sealed (waiting for publication).',
    labelNames: ['table', 'state'] as const,
    registers: [this.registry],
  });
  readonly tableStalled = new Gauge({
    name: 'kafka_lance_table_stalled',
    help: 'A table publishes nothing now and needs someone (1): refused (its Lance table refuses the definition: a declared type, its mode), failing (opening or publishing it keeps failing: the store, the disk) or damaged (a publication found half or twice in its Lance table: repair, then restart); the other tables go on. A plan waiting for its retry is not counted. The log line table.stalled says why.',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });
  readonly lastPublication = new Gauge({
    name: 'kafka_lance_table_last_publication_timestamp_seconds',
    help: "Unix time of this replica's last publication into the table (0: none since the start).",
    labelNames: ['table'] as const,
    registers: [this.registry],
  });
  readonly durableSync = new Histogram({
    name: 'kafka_lance_durable_sync_seconds',
    help: 'Seconds per durability tick (write and fsync of every open part in every staging worker).',
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  // Object storage: the start probe's verdict on the Lance store.
  readonly storeAtomicCommits = new Gauge({
    name: 'kafka_lance_store_atomic_commits',
    help: 'The Lance store makes concurrent commits atomic (1: local directory, s3+ddb:// commit table, or probe passed; 0: a declared single writer on a store without atomic commits, see DESIGN.md "Object storage").',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });

  // Declared indexes, reported by the replica that keeps them (src/materializer/index-upkeep.ts).
  readonly indexUnindexedRows = new Gauge({
    name: 'kafka_lance_index_unindexed_rows',
    help: 'Rows of the table a declared index does not cover yet (all rows until it is first built), after the last maintenance round.',
    labelNames: ['table', 'index'] as const,
    registers: [this.registry],
  });
  readonly indexUpdateDuration = new Gauge({
    name: 'kafka_lance_index_update_duration_seconds',
    help: "Seconds the declared index's last build, retraining or incremental update took.",
    labelNames: ['table', 'index'] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 10 });
    // Exported at 0 from the start (the reasons of src/kafka/consumer-restart.ts), so that a
    // rate over them is defined before the first restart.
    for (const reason of ['retriable_error', 'broker_unavailable', 'authentication_refused'])
      this.consumerRestarts.inc({ reason }, 0);
  }

  /** Names of every family this registry exports (for checking dashboards and rules). */
  familyNames(): string[] {
    return this.registry.getMetricsAsArray().map((m) => m.name);
  }
}
