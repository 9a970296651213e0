import { errorMessage } from '../common/errors';
import type { StagingWorkerInit, WorkerReply, WorkerRequest } from './protocol';
import { ReplyRouter, StagingWorkerError, type StagingLane } from './staging-lane';
import { StagingService } from './staging-service';

/**
 * A staging lane on the main thread: the same StagingService a worker thread runs,
 * without the thread. A batch is decoded from the fetched messages themselves (no packed
 * copy, no transfer), and there is one isolate fewer to collect. Its requests run one at
 * a time in order, like a worker's port; decoding a batch holds the event loop for as
 * long as it takes (milliseconds per batch with the native decoder), and every file
 * operation is asynchronous.
 */
export class InThreadLane implements StagingLane {
  readonly packsBatches = false;
  readonly #router: ReplyRouter;
  readonly #onFatal: (error: Error) => void;
  #chain: Promise<void> = Promise.resolve();

  private constructor(
    readonly index: number,
    private readonly service: StagingService,
    onFatal: (error: Error) => void,
  ) {
    this.#router = new ReplyRouter(onFatal);
    this.#onFatal = onFatal;
  }

  static async start(init: StagingWorkerInit, onFatal: (error: Error) => void): Promise<InThreadLane> {
    return new InThreadLane(
      init.workerIndex,
      await StagingService.open(init, 'staging-main-thread'),
      onFatal,
    );
  }

  request<T extends WorkerReply>(
    build: (id: number) => WorkerRequest,
    _transfer?: ArrayBuffer[],
    observe?: (reply: T) => void,
  ): Promise<T> {
    const { id, reply } = this.#router.expect(observe);
    const request = build(id);
    // handle() answers a failure with an error reply; what still escapes (a reply's
    // observer that threw) leaves the lane in an unknown state, so the lane fails as a
    // dead thread would, and runs nothing more. Each step first yields to the event
    // loop: staging a batch does no I/O, so a queue of batches would otherwise be decoded
    // in one go while heartbeats, timers and the metrics endpoint wait.
    this.#chain = this.#chain
      .then(async () => {
        await new Promise<void>((resolve) => setImmediate(resolve));
        if (this.#router.failed) return;
        this.#router.deliver(await this.service.handle(request));
      })
      .catch((error: unknown) => {
        const failure = new StagingWorkerError(
          `staging on the main thread failed: ${errorMessage(error)}`,
          true,
        );
        this.#router.failAll(failure);
        this.#onFatal(failure);
      });
    return reply;
  }

  stopped(): Promise<void> {
    return this.#chain;
  }
}
