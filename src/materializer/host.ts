import { Worker } from 'node:worker_threads';
import { KafkaLanceError } from '../common/errors';
import type { Logger } from '../common/logger';
import { compiledEntry } from '../pool/compiled-entry';
import type { MaterializerStats } from './materializer';
import type { MaterializerReply, MaterializerWorkerInit, OwnershipRow } from './worker-protocol';

/** The main thread's handle on the materializer worker. */
export class MaterializerHost {
  #stats: MaterializerStats | undefined;
  readonly #stopped: Promise<void>;

  private constructor(
    private readonly worker: Worker,
    onFatal: (error: Error) => void,
    logger: Logger,
  ) {
    this.#stopped = new Promise((resolve) => {
      worker.on('message', (m: MaterializerReply) => {
        if (m.type === 'stats') this.#stats = m.stats;
        else if (m.type === 'fatal') {
          logger.fatal({ event: 'materializer.fatal', reason: m.message }, 'materializer stopped');
          onFatal(new KafkaLanceError('PART_CORRUPT', `materializer: ${m.message}`));
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
  ): Promise<MaterializerHost> {
    const worker = new Worker(compiledEntry(__dirname, 'materializer-worker.ts'), { workerData: init });
    await new Promise<void>((resolve, reject) => {
      const onMessage = (m: MaterializerReply) => {
        if (m.type === 'ready') resolve();
        else if (m.type === 'fatal')
          reject(new KafkaLanceError('PART_CORRUPT', `materializer: ${m.message}`));
        else return;
        worker.off('message', onMessage);
      };
      worker.on('message', onMessage);
      worker.once('error', reject);
    });
    return new MaterializerHost(worker, onFatal, logger);
  }

  get stats(): MaterializerStats | undefined {
    return this.#stats;
  }

  updateOwnership(partitions: readonly OwnershipRow[]): void {
    this.worker.postMessage({ type: 'ownership', partitions });
  }

  /** Lets the running publication finish, then the thread ends by itself. */
  async stop(): Promise<void> {
    this.worker.postMessage({ type: 'stop' });
    await this.#stopped;
  }
}
