import { DiskFullError, KafkaLanceError } from '../common/errors';
import type { WorkerReply, WorkerRequest } from './protocol';

/** A staging lane failed in a way that leaves nothing safe to continue with. */
export class StagingWorkerError extends KafkaLanceError {
  constructor(message: string, fatal: boolean) {
    super('STAGING_WORKER_FAILED', message, { retriable: !fatal, context: { fatal } });
  }
}

/**
 * Where a share of the partitions is staged: a worker thread (worker-lane.ts) or the
 * main thread itself (in-thread-lane.ts). Either handles its requests one at a time in
 * the order they were made, and answers each with one reply.
 */
export interface StagingLane {
  readonly index: number;
  /**
   * Whether a batch crosses as packed transferable buffers (a worker thread: one copy
   * of its bytes instead of a structured clone per message) or as the messages
   * themselves (the main thread: no copy).
   */
  readonly packsBatches: boolean;
  /**
   * Sends a request; `observe` runs synchronously on its reply, before the promise
   * settles and before any later reply is handled.
   */
  request<T extends WorkerReply>(
    build: (id: number) => WorkerRequest,
    transfer?: ArrayBuffer[],
    observe?: (reply: T) => void,
  ): Promise<T>;
  /** After the close reply: settles once the lane holds nothing (its thread is gone). */
  stopped(): Promise<void>;
}

type Pending = {
  resolve: (reply: WorkerReply) => void;
  reject: (error: Error) => void;
  observe?: (reply: WorkerReply) => void;
};

/** Matches a lane's replies to its requests by id: the part both kinds of lane share. */
export class ReplyRouter {
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #failed: Error | undefined;

  constructor(private readonly onFatal: (error: Error) => void) {}

  /** A new request id and the promise of its reply; rejects at once when the lane is gone. */
  expect<T extends WorkerReply>(observe?: (reply: T) => void): { id: number; reply: Promise<T> } {
    const id = this.#nextId++;
    if (this.#failed) return { id, reply: Promise.reject(this.#failed) };
    const reply = new Promise<T>((resolve, reject) => {
      this.#pending.set(id, {
        resolve: resolve as (r: WorkerReply) => void,
        reject,
        observe: observe as ((r: WorkerReply) => void) | undefined,
      });
    });
    return { id, reply };
  }

  get failed(): boolean {
    return this.#failed !== undefined;
  }

  deliver(reply: WorkerReply): void {
    if (reply.type === 'ready') return;
    if (reply.type === 'error' && reply.fatal) this.onFatal(new StagingWorkerError(reply.message, true));
    const id = reply.id;
    if (id === undefined) return;
    const pending = this.#pending.get(id);
    if (!pending) return;
    this.#pending.delete(id);
    if (reply.type === 'error') {
      pending.reject(
        reply.diskFull
          ? new DiskFullError('staging', reply.diskFull.path, reply.diskFull.operation, reply.message)
          : new StagingWorkerError(reply.message, reply.fatal),
      );
    } else {
      try {
        pending.observe?.(reply);
      } catch (error) {
        // The request is answered (its promise fails), then the lane fails with it: a
        // reply whose consequences were not all recorded leaves nothing safe to continue.
        pending.reject(error instanceof Error ? error : new Error(String(error)));
        throw error;
      }
      pending.resolve(reply);
    }
  }

  /** The lane is gone: every waiting request and every later one fails with `error`. */
  failAll(error: Error): void {
    this.#failed ??= error;
    for (const p of this.#pending.values()) p.reject(error);
    this.#pending.clear();
  }
}
