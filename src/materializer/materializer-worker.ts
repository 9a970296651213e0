/**
 * The materializer's thread: publications run here, off the main thread that
 * heartbeats for Kafka (a Lance add serializes for hundreds of milliseconds). It is
 * never terminated from outside: `stop` lets the running publication finish.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { errorMessage } from '../common/errors';
import { createLogger } from '../common/logger';
import { tpKey } from '../common/offsets';
import { Materializer } from './materializer';
import type { PartitionOwnership } from './planner';
import { PartialPublicationError } from './publisher';
import type { MaterializerReply, MaterializerRequest, MaterializerWorkerInit } from './worker-protocol';

async function main(): Promise<void> {
  const port = parentPort;
  if (!port) throw new Error('materializer-worker runs only as a worker thread');
  const init = workerData as MaterializerWorkerInit;
  const logger = createLogger({ level: init.logLevel as 'info', name: 'materializer' });
  const reply = (m: MaterializerReply) => port.postMessage(m);
  // Stats after every publication too, not only after a run (a run can drain a backlog).
  const materializer: Materializer = await Materializer.open({
    ...init,
    logger,
    onPublished: () => reply({ type: 'stats', stats: materializer.stats() }),
  });
  let ownership: Map<ReturnType<typeof tpKey>, PartitionOwnership> | undefined;
  let ownershipSequence = 0;
  let stopping = false;
  let wake: (() => void) | undefined;
  port.on('message', (m: MaterializerRequest) => {
    if (m.type === 'ownership') {
      // Sequenced at the source too; this guards the planner against any reordering on the way.
      if (m.sequence <= ownershipSequence) return;
      ownershipSequence = m.sequence;
      ownership = new Map(
        m.partitions.map(([t, p, chain, committed]) => [tpKey(t, p), { chain, committed }]),
      );
      materializer.setOwnership(ownership);
    } else if (m.type === 'sealed') {
      materializer.sealed(m.parts);
      return; // the next ownership snapshot (every pollMs) wakes the loop; no extra round
    } else {
      stopping = true;
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
  materializer.close();
  reply({ type: 'stopped' });
  port.close();
}

main().catch((error: unknown) => {
  parentPort?.postMessage({ type: 'fatal', message: errorMessage(error) } satisfies MaterializerReply);
});
