/**
 * A staging worker thread: runs a StagingService on the requests of its port, one at a
 * time in arrival order, so a batch's reply always arrives before the reply of a later
 * sync that covers it.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { errorMessage } from '../common/errors';
import type { StagingWorkerInit, WorkerReply, WorkerRequest } from './protocol';
import { StagingService } from './staging-service';

async function main(): Promise<void> {
  const port = parentPort;
  if (!port) throw new Error('staging-worker runs only as a worker thread');
  const init = workerData as StagingWorkerInit;
  const service = await StagingService.open(init, `staging-worker-${init.workerIndex}`);
  const reply = (message: WorkerReply) => port.postMessage(message);
  let chain: Promise<void> = Promise.resolve();
  port.on('message', (request: WorkerRequest) => {
    chain = chain.then(async () => {
      const answer = await service.handle(request);
      reply(answer);
      if (answer.type === 'close') port.close();
    });
  });
  reply({ type: 'ready' });
}

main().catch((error: unknown) => {
  parentPort?.postMessage({
    type: 'error',
    id: undefined,
    message: errorMessage(error),
    fatal: true,
  } satisfies WorkerReply);
});
