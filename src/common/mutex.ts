/**
 * A FIFO async mutex. Used for short critical sections (a table's lifecycle
 * lock); nothing that waits on I/O for long should run under it.
 */
export class Mutex {
  #tail: Promise<void> = Promise.resolve();

  async lock(): Promise<Disposable> {
    let release!: () => void;
    const previous = this.#tail;
    this.#tail = new Promise<void>((resolve) => (release = resolve));
    await previous;
    let released = false;
    return {
      [Symbol.dispose]: () => {
        if (!released) {
          released = true;
          release();
        }
      },
    };
  }

  async run<T>(fn: () => Promise<T> | T): Promise<T> {
    using _held = await this.lock();
    return await fn();
  }
}
