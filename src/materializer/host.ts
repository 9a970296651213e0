import type { SealedPart } from '../staging/sealed-part';
import { Worker } from 'node:worker_threads';
import { KafkaLanceError } from '../common/errors';
import type { Logger } from '../common/logger';
import type { DiskPressure } from '../kafka/disk-pressure';
import type { Metrics } from '../metrics/metrics';
import { compiledEntry, WORKER_RESOURCE_LIMITS } from '../pool/compiled-entry';
import type { IndexReport } from '../lance/index-keeper';
import type { MaterializerStats } from './materializer-stats';
import type { OwnershipRow } from '../ownership/partition-ownership';
import type { MaterializerReply, MaterializerWorkerInit } from './worker-protocol';

/** The main thread's handle on the materializer worker. */
export class MaterializerHost {
  #stats: MaterializerStats | undefined;
  readonly #stopped: Promise<void>;

  private constructor(
    private readonly worker: Worker,
    onFatal: (error: Error) => void,
    logger: Logger,
    private readonly metrics: Metrics,
    private readonly labels: { table: string; mode: string },
    private readonly diskPressure: DiskPressure | undefined,
  ) {
    this.#stopped = new Promise((resolve) => {
      worker.on('message', (m: MaterializerReply) => {
        if (m.type === 'stats') this.#record(m.stats);
        else if (m.type === 'indexes') this.#recordIndexes(m.reports);
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
    // Series exist from the start (a histogram without observations shows no sample otherwise).
    for (const kind of ['fetch', 'decode'] as const) metrics.permitWait.zero({ kind });
    metrics.sourceWait.zero({ table: init.lance.table, mode: init.mode });
    for (const phase of ['prepare', 'write'] as const)
      metrics.publicationDuration.zero({ table: init.lance.table, phase });
    metrics.publicationFailures.inc({ table: init.lance.table, reason: 'storage' }, 0);
    metrics.quarantinedParts.inc({ table: init.lance.table, reason: 'schema-incompatible' }, 0);
    metrics.reservationLimit.set(init.sourceReservationBytes);
    metrics.permitsCapacity.set({ kind: 'fetch' }, init.fetchPermits);
    metrics.permitsCapacity.set({ kind: 'decode' }, init.decodePermits);
    return new MaterializerHost(
      worker,
      onFatal,
      logger,
      metrics,
      { table: init.lance.table, mode: init.mode },
      diskPressure,
    );
  }

  /** Worker reports → the main registry: what the counts grew by, and recent events as observations. */
  #record(stats: MaterializerStats): void {
    this.#stats = stats;
    // The materializer forgets its disk-full state at its next successful publication.
    if (stats.diskFull) this.diskPressure?.reportFull(stats.diskFull.stage, stats.diskFull);
    else this.diskPressure?.reportWritten('lance');
    const m = this.metrics;
    const { table, mode } = this.labels;
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
    for (const p of stats.permits) m.permitsInUse.set({ kind: p.kind }, p.inUse);
    for (const w of stats.recentPermitWaits)
      for (const s of w.seconds) m.permitWait.observe({ kind: w.kind }, s);
    m.reservationBytes.set(stats.reservation.bytes);
    m.stagingParts.set({ table, state: 'sealed' }, stats.waitingParts + stats.unresolvableParts);
  }

  #recordIndexes(reports: readonly IndexReport[]): void {
    const { table } = this.labels;
    for (const r of reports) {
      this.metrics.indexUnindexedRows.set({ table, index: r.index }, r.unindexedRows);
      if (r.seconds !== undefined) this.metrics.indexUpdateDuration.set({ table, index: r.index }, r.seconds);
    }
  }

  get stats(): MaterializerStats | undefined {
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
