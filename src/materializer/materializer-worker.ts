/**
 * The materializer's thread: publications run here, off the main thread that
 * heartbeats for Kafka (a Lance add serializes for hundreds of milliseconds). It is
 * never terminated from outside: `stop` lets the running publication finish.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { errorMessage } from '../common/errors';
import { createLogger, type Logger } from '../common/logger';
import { tpKey } from '../common/offsets';
import { IndexUpkeep } from './index-upkeep';
import { Materializer } from './materializer';
import type { PartitionOwnership } from '../ownership/partition-ownership';
import { PartialPublicationError } from './publication-errors';
import type { MaterializerReply, MaterializerRequest, MaterializerWorkerInit } from './worker-protocol';
import { registerSecrets, secretValuesOf } from '../common/redaction';

async function main(): Promise<void> {
  const port = parentPort;
  if (!port) throw new Error('materializer-worker runs only as a worker thread');
  const init = workerData as MaterializerWorkerInit;
  // This thread loads no definition: its store's secrets are scrubbed from its lines too.
  registerSecrets(secretValuesOf({ client: {}, lance: init.lance }));
  const logger = createLogger({ level: init.logLevel as 'info', name: 'materializer' });
  const reply = (m: MaterializerReply) => port.postMessage(m);
  // Stats after every publication too, not only after a run (a run can drain a backlog).
  const materializer: Materializer = await Materializer.open({
    ...init,
    logger,
    onPublished: () => reply({ type: 'stats', stats: materializer.stats() }),
  });
  const indexes = new IndexUpkeep(
    init.lance,
    init.indexes,
    init.indexEveryMs,
    materializer,
    logger,
    (reports) => reply({ type: 'indexes', reports }),
  );
  let ownership: Map<ReturnType<typeof tpKey>, PartitionOwnership> | undefined;
  let ownershipSequence = 0;
  let stopping = false;
  let drainUntil = 0;
  let wake: (() => void) | undefined;
  port.on('message', (m: MaterializerRequest) => {
    if (m.type === 'ownership') {
      // Sequenced at the source too; this guards the planner against any reordering on the way.
      if (m.sequence <= ownershipSequence) return;
      ownershipSequence = m.sequence;
      ownership = new Map(m.partitions.map(([t, p, partition]) => [tpKey(t, p), partition]));
      materializer.setOwnership(ownership);
    } else if (m.type === 'sealed') {
      materializer.sealed(m.parts);
      return; // the next ownership snapshot (every pollMs) wakes the loop; no extra round
    } else {
      stopping = true;
      drainUntil = m.drainUntil;
      // No index build may begin while the drain runs: the stop waits for what is in flight.
      indexes.abort();
    }
    wake?.();
  });
  reply({ type: 'ready' });
  // Interrupted publications are finished at the start of every run (runOnce → resume).
  let backoffMs = 0;
  let lastOptimize = Date.now();
  while (!stopping) {
    if (ownership) {
      try {
        await materializer.runOnce();
        backoffMs = 0;
        if (init.optimizeEveryMs > 0 && Date.now() - lastOptimize >= init.optimizeEveryMs) {
          lastOptimize = Date.now();
          await materializer.optimizeIfLeader();
        }
        indexes.tick();
      } catch (error) {
        if (error instanceof PartialPublicationError) throw error;
        // Lance unreachable, a disk error...: nothing is lost (sources stay until published); retry with backoff.
        backoffMs = Math.min(30_000, Math.max(500, backoffMs * 2));
        logger.warn(
          { event: 'materializer.retry', backoffMs, err: errorMessage(error) },
          'publication failed; retrying',
        );
      }
      reply({ type: 'stats', stats: materializer.stats() });
    }
    if (stopping) break;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, Math.max(init.pollMs, backoffMs));
      wake = () => {
        if (backoffMs > 0 && !stopping) return; // keep backing off unless stopping
        clearTimeout(timer);
        resolve();
      };
    });
    wake = undefined;
  }
  if (ownership) await drain(materializer, drainUntil, logger);
  await indexes.stop();
  reply({ type: 'stats', stats: materializer.stats() });
  materializer.close();
  reply({ type: 'stopped' });
  port.close();
}

/**
 * A graceful stop's last publications (DESIGN.md, "Scale-down and old epochs"): the
 * replica has committed, sealed and left the group, and the last snapshot (read after the
 * final commit) makes its staged rows ready. Publish them now, small groups included, so
 * that a replica scaled away leaves nothing committed on its volume; start nothing after
 * the deadline (a Lance add is never interrupted: the process would crash). What is left
 * stays resolvable by the next start on this data directory, however many rebalances later.
 */
async function drain(materializer: Materializer, until: number, logger: Logger): Promise<void> {
  let publications = 0;
  let rows = 0;
  let failed: string | undefined;
  while (Date.now() < until) {
    let results;
    try {
      results = await materializer.runOnce(Date.now(), { until });
    } catch (error) {
      if (error instanceof PartialPublicationError) throw error;
      failed = errorMessage(error); // the store is down or slow: what is left waits for the next start
      break;
    }
    publications += results.length;
    rows += results.reduce((n, r) => n + r.rows, 0);
    if (results.length > 0) continue;
    // Nothing published: done, unless a failed plan waits for its retry (a slow store).
    if (materializer.left.retryingPlans === 0) break;
    await new Promise((resolve) => setTimeout(resolve, Math.min(1_000, Math.max(0, until - Date.now()))));
  }
  const { waitingParts, unresolvableParts, retryingPlans } = materializer.left;
  const left = await materializer.partsOnDisk();
  const facts = {
    event: 'materializer.drained',
    publications,
    rows,
    left,
    waitingParts,
    unresolvableParts,
    retryingPlans,
    timedOut: Date.now() >= until,
  };
  if (left === 0 && failed === undefined) logger.info(facts, 'stop: every staged part published');
  else
    logger.warn(
      { ...facts, ...(failed !== undefined ? { err: failed } : {}) },
      'stop: staged parts left on this data directory; a replica started on it publishes them',
    );
}

main().catch((error: unknown) => {
  parentPort?.postMessage({ type: 'fatal', message: errorMessage(error) } satisfies MaterializerReply);
});
