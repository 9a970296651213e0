import { FileLockConflictError } from '../common/errors';

/**
 * File locks make every file task exclusive: a flush, seal, plan, publication or
 * recovery locks each path it will work on before touching it, and only the
 * task holding the lock object can release it. A dropped or failed task
 * releases exactly its own locks (use `using lock = locks.lock(...)`).
 *
 * The locks are per thread on purpose: within one process, each staging file
 * has one thread that may act on it (a writer's thread owns its open parts;
 * after sealing, the planner's thread owns the sealed part), and recovery runs
 * before any writer starts. Locks order the tasks inside that thread.
 */
export class FileLocks {
  readonly #holders = new Map<string, FileLock>();

  /** Locks `path` for `owner`, or throws FileLockConflictError naming the holder. */
  lock(path: string, owner: string): FileLock {
    const held = this.#holders.get(path);
    if (held) throw new FileLockConflictError(path, held.owner, owner);
    const lock = new FileLock(path, owner, (l) => {
      if (this.#holders.get(path) === l) this.#holders.delete(path);
    });
    this.#holders.set(path, lock);
    return lock;
  }

  /** Like lock(), but returns undefined when another task holds the path. */
  tryLock(path: string, owner: string): FileLock | undefined {
    return this.#holders.has(path) ? undefined : this.lock(path, owner);
  }

  /** Locks all paths or none. */
  lockAll(paths: readonly string[], owner: string): FileLockSet {
    const taken: FileLock[] = [];
    try {
      for (const p of paths) taken.push(this.lock(p, owner));
    } catch (error) {
      for (const l of taken) l.release();
      throw error;
    }
    return new FileLockSet(taken);
  }

  holderOf(path: string): string | undefined {
    return this.#holders.get(path)?.owner;
  }

  get size(): number {
    return this.#holders.size;
  }
}

export class FileLock implements Disposable {
  #released = false;

  constructor(
    readonly path: string,
    readonly owner: string,
    private readonly onRelease: (lock: FileLock) => void,
  ) {}

  get released(): boolean {
    return this.#released;
  }

  /** Idempotent: releasing twice, or after the path was locked again by another task, changes nothing else. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.onRelease(this);
  }

  [Symbol.dispose](): void {
    this.release();
  }
}

export class FileLockSet implements Disposable {
  constructor(readonly locks: readonly FileLock[]) {}

  release(): void {
    for (const l of this.locks) l.release();
  }

  [Symbol.dispose](): void {
    this.release();
  }
}
