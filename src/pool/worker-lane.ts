import { Worker } from 'node:worker_threads';
import { compiledEntry, WORKER_RESOURCE_LIMITS } from '../common/compiled-entry';
import type { StagingWorkerInit, WorkerReply, WorkerRequest } from './protocol';
import { ReplyRouter, StagingWorkerError, type StagingLane } from './staging-lane';

/** A staging lane in its own worker thread (staging-worker.ts). */
export class WorkerLane implements StagingLane {
  readonly packsBatches = true;
  readonly #router: ReplyRouter;
  /** Settles when the thread is gone; set up at once so an early exit is never missed. */
  readonly #exit: Promise<void>;

  private constructor(
    readonly index: number,
    private readonly worker: Worker,
    onFatal: (error: Error) => void,
  ) {
    const router = new ReplyRouter(onFatal);
    this.#router = router;
    worker.on('message', (reply: WorkerReply) => router.deliver(reply));
    worker.on('error', (error) => {
      router.failAll(error);
      onFatal(error);
    });
    this.#exit = new Promise((resolve) => {
      worker.on('exit', (code) => {
        router.failAll(new StagingWorkerError(`staging worker ${index} exited (code ${code})`, true));
        resolve();
      });
    });
  }

  /** Starts the thread and waits until its staging is open. */
  static async start(init: StagingWorkerInit, onFatal: (error: Error) => void): Promise<WorkerLane> {
    const entry = compiledEntry(__dirname, 'staging-worker.ts');
    const worker = new Worker(entry, { workerData: init, resourceLimits: WORKER_RESOURCE_LIMITS });
    await new Promise<void>((resolve, reject) => {
      const onMessage = (reply: WorkerReply) => {
        if (reply.type === 'ready') resolve();
        else if (reply.type === 'error') reject(new StagingWorkerError(reply.message, true));
        else return;
        worker.off('message', onMessage);
      };
      worker.on('message', onMessage);
      worker.once('error', reject);
    });
    return new WorkerLane(init.workerIndex, worker, onFatal);
  }

  request<T extends WorkerReply>(
    build: (id: number) => WorkerRequest,
    transfer: ArrayBuffer[] = [],
    observe?: (reply: T) => void,
  ): Promise<T> {
    const { id, reply } = this.#router.expect(observe);
    // A lane already gone rejected at once: nothing is posted to a dead thread.
    if (!this.#router.failed) this.worker.postMessage(build(id), transfer);
    return reply;
  }

  async stopped(): Promise<void> {
    // The worker closed its port after sealing: it holds no open file and is not
    // inside a write, so ending a thread that lingers is safe.
    const lingering = setTimeout(() => void this.worker.terminate(), 5_000);
    await this.#exit;
    clearTimeout(lingering);
  }
}
