import type { SealedPart } from '../staging/sealed-part';
import { Worker } from 'node:worker_threads';
import { KafkaLanceError } from '../common/errors';
import type { Logger } from '../common/logger';
import type { DiskPressure } from '../common/disk-pressure';
import type { Metrics } from '../metrics/metrics';
import { compiledEntry, WORKER_RESOURCE_LIMITS } from '../common/compiled-entry';
import type { IndexReport } from '../lance/index-keeper';
import type { MaterializerStats } from './materializer-stats';
import type { OwnershipRow } from '../ownership/partition-ownership';
import { TableGauges } from '../metrics/table-gauges';
import { DiskFullLatch } from './disk-full-latch';
import type { TableReport } from './table-set';
import { alertsOn } from './table-stall';
import type { MaterializerReply, MaterializerWorkerInit } from './worker-protocol';

/** The main thread's handle on the materializer worker (every table it serves). */
export class MaterializerHost {
  readonly #stats = new Map<string, MaterializerStats>();
  readonly #gauges = new TableGauges();
  readonly #diskFull = new DiskFullLatch();
  /** Label values whose series were made at first sight (a histogram shows no sample otherwise). */
  readonly #labelled = new Set<string>();
  readonly #stopped: Promise<void>;

  private constructor(
    private readonly worker: Worker,
    onFatal: (error: Error) => void,
    logger: Logger,
    private readonly metrics: Metrics,
    private readonly mode: string,
    private readonly diskPressure: DiskPressure | undefined,
  ) {
    this.#stopped = new Promise((resolve) => {
      worker.on('message', (m: MaterializerReply) => {
        if (m.type === 'stats') this.#recordTables(m.tables);
        else if (m.type === 'indexes') this.#recordIndexes(m.table, m.reports);
        else if (m.type === 'fatal') {
          logger.fatal({ event: 'materializer.fatal', reason: m.message }, 'materializer stopped');
          onFatal(new KafkaLanceError('MATERIALIZER_FAILED', `materializer: ${m.message}`));
        }
      });
      worker.on('error', (error) => onFatal(error));
      worker.on('exit', () => resolve());
    });
  }

  static async start(
    init: MaterializerWorkerInit,
    onFatal: (error: Error) => void,
    logger: Logger,
    metrics: Metrics,
    diskPressure?: DiskPressure,
  ): Promise<MaterializerHost> {
    const worker = new Worker(compiledEntry(__dirname, 'materializer-worker.ts'), {
      workerData: init,
      resourceLimits: WORKER_RESOURCE_LIMITS,
    });
    await new Promise<void>((resolve, reject) => {
      const onMessage = (m: MaterializerReply) => {
        if (m.type === 'ready') resolve();
        else if (m.type === 'fatal')
          reject(new KafkaLanceError('MATERIALIZER_FAILED', `materializer: ${m.message}`));
        else return;
        worker.off('message', onMessage);
      };
      worker.on('message', onMessage);
      worker.once('error', reject);
    });
    metrics.tableLabels.configure(init.maxTableLabels, logger);
    // Series exist from the start (a histogram without observations shows no sample otherwise).
    for (const kind of ['fetch', 'decode'] as const) metrics.permitWait.zero({ kind });
    metrics.reservationLimit.set(init.sourceReservationBytes);
    metrics.permitsCapacity.set({ kind: 'fetch' }, init.fetchPermits);
    metrics.permitsCapacity.set({ kind: 'decode' }, init.decodePermits);
    return new MaterializerHost(worker, onFatal, logger, metrics, init.mode, diskPressure);
  }

  /** Every table's report: its counts and observations under its (bounded) label, then the per-label gauges. */
  #recordTables(reports: readonly TableReport[]): void {
    for (const r of reports) {
      const table = this.metrics.tableLabels.of(r.table);
      this.#zeroSeries(table);
      if (r.stats) {
        this.#diskFull.take(r.stats);
        this.#stats.set(r.table, r.stats);
        this.#record(table, r.stats);
      }
      this.#gauges.set(r.table, {
        // A table not open (refused, failing to open) reports the parts waiting in its directory.
        sealedParts: r.stats ? r.stats.waitingParts + r.stats.unresolvableParts : (r.partsWaiting ?? 0),
        stalled: alertsOn(r.stalled) ? 1 : 0,
      });
    }
    // Tables beyond the label bound share `_other`: its gauges combine theirs (table-gauges.ts).
    for (const [table, g] of this.#gauges.perLabel((t) => this.metrics.tableLabels.of(t))) {
      this.metrics.stagingParts.set({ table, state: 'sealed' }, g.sealedParts);
      this.metrics.tableStalled.set({ table }, g.stalled);
    }
    // One disk: full from a table's new disk-full failure until any table publishes again.
    const full = this.#diskFull.full;
    if (full) this.diskPressure?.reportFull(full.stage, full);
    else this.diskPressure?.reportWritten('lance');
  }

  #zeroSeries(table: string): void {
    if (this.#labelled.has(table)) return;
    this.#labelled.add(table);
    const m = this.metrics;
    m.sourceWait.zero({ table, mode: this.mode });
    for (const phase of ['prepare', 'write'] as const) m.publicationDuration.zero({ table, phase });
    m.publicationFailures.inc({ table, reason: 'storage' }, 0);
    m.quarantinedParts.inc({ table, reason: 'schema-incompatible' }, 0);
    m.lastPublication.set({ table }, 0);
  }

  /** One table's report → the main registry: what the counts grew by, and recent events as observations. */
  #record(table: string, stats: MaterializerStats): void {
    const m = this.metrics;
    const mode = this.mode;
    const grown = stats.counted;
    m.publishedRecords.inc({ table }, grown.publishedRows);
    m.publishedBytes.inc({ table }, grown.publishedBytes);
    m.publications.inc({ table, result: 'success' }, grown.publications);
    m.publications.inc({ table, result: 'failure' }, grown.failedPublications);
    for (const [reason, n] of Object.entries(grown.failures)) m.publicationFailures.inc({ table, reason }, n);
    for (const [reason, n] of Object.entries(grown.quarantinedParts))
      m.quarantinedParts.inc({ table, reason }, n);
    // Rows of a set-aside publication are dead letters like any other: the table refused their schema.
    for (const [topic, n] of Object.entries(grown.deadLetteredRows))
      m.deadLetters.inc({ topic, reason: 'schema-mismatch' }, n);
    for (const r of stats.recent) {
      if (r.merge) {
        m.upsertedRows.inc({ table }, r.merge.upserts);
        m.deletedRows.inc({ table }, r.merge.deletes);
        m.mergedRows.inc({ table, change: 'inserted' }, r.merge.inserted);
        m.mergedRows.inc({ table, change: 'updated' }, r.merge.updated);
        m.mergeDuration.observe({ table }, r.merge.seconds);
      }
      m.publicationDuration.observe({ table, phase: 'prepare' }, r.prepareSeconds);
      m.publicationDuration.observe({ table, phase: 'write' }, r.writeSeconds);
      m.sourceWait.observe({ table, mode }, r.sourceWaitSeconds);
    }
    if (stats.recent.length > 0) m.lastPublication.set({ table }, Date.now() / 1000);
    // The permits and the reservation are the worker's, shared by its tables: any report has them
    // (their waits are drained by whichever table reported first).
    for (const p of stats.permits) m.permitsInUse.set({ kind: p.kind }, p.inUse);
    for (const w of stats.recentPermitWaits)
      for (const s of w.seconds) m.permitWait.observe({ kind: w.kind }, s);
    m.reservationBytes.set(stats.reservation.bytes);
  }

  #recordIndexes(name: string, reports: readonly IndexReport[]): void {
    this.#gauges.setIndexes(name, reports);
    const label = this.metrics.tableLabels.of(name);
    // Only the reporting table's label changes; under `_other` its value combines every table's.
    const combined = this.#gauges.indexesPerLabel((t) => this.metrics.tableLabels.of(t)).get(label);
    for (const [index, v] of combined ?? []) {
      this.metrics.indexUnindexedRows.set({ table: label, index }, v.unindexedRows);
      if (v.seconds !== undefined) this.metrics.indexUpdateDuration.set({ table: label, index }, v.seconds);
    }
  }

  /** Each table's last reported stats, by table name. */
  get stats(): ReadonlyMap<string, MaterializerStats> {
    return this.#stats;
  }

  updateOwnership(partitions: readonly OwnershipRow[], sequence: number): void {
    this.worker.postMessage({ type: 'ownership', partitions, sequence });
  }

  /** Parts just sealed by this replica's staging: the catalog takes them as described. */
  sealed(parts: readonly SealedPart[]): void {
    this.worker.postMessage({ type: 'sealed', parts });
  }

  /**
   * Lets the running publication finish, publishes what is ready (starting nothing after
   * `drainUntil`, epoch ms), then the thread ends by itself.
   */
  async stop(drainUntil: number): Promise<void> {
    this.worker.postMessage({ type: 'stop', drainUntil });
    await this.#stopped;
  }
}
