import { ClaimConflictError } from '../common/errors';

/**
 * Claims make every file task exclusive: a flush, seal, plan, publication or
 * recovery claims each path it will work on before touching it, and only the
 * task holding the claim object can release it. A dropped or failed task
 * releases exactly its own claims (use `using claim = registry.claim(...)`).
 *
 * The registry is per thread on purpose: within one process, each staging file
 * has one thread that may act on it (a writer's thread owns its open parts;
 * after sealing, the planner's thread owns the sealed part), and recovery runs
 * before any writer starts. Claims order the tasks inside that thread.
 */
export class ClaimRegistry {
  readonly #holders = new Map<string, Claim>();

  /** Claims `path` for `owner`, or throws ClaimConflictError naming the holder. */
  claim(path: string, owner: string): Claim {
    const held = this.#holders.get(path);
    if (held) throw new ClaimConflictError(path, held.owner, owner);
    const claim = new Claim(path, owner, (c) => {
      if (this.#holders.get(path) === c) this.#holders.delete(path);
    });
    this.#holders.set(path, claim);
    return claim;
  }

  /** Like claim(), but returns undefined when another task holds the path. */
  tryClaim(path: string, owner: string): Claim | undefined {
    return this.#holders.has(path) ? undefined : this.claim(path, owner);
  }

  /** Claims all paths or none. */
  claimAll(paths: readonly string[], owner: string): ClaimSet {
    const taken: Claim[] = [];
    try {
      for (const p of paths) taken.push(this.claim(p, owner));
    } catch (error) {
      for (const c of taken) c.release();
      throw error;
    }
    return new ClaimSet(taken);
  }

  holderOf(path: string): string | undefined {
    return this.#holders.get(path)?.owner;
  }

  get size(): number {
    return this.#holders.size;
  }
}

export class Claim implements Disposable {
  #released = false;

  constructor(
    readonly path: string,
    readonly owner: string,
    private readonly onRelease: (claim: Claim) => void,
  ) {}

  get released(): boolean {
    return this.#released;
  }

  /** Idempotent: releasing twice, or after the path was re-claimed by another task, changes nothing else. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.onRelease(this);
  }

  [Symbol.dispose](): void {
    this.release();
  }
}

export class ClaimSet implements Disposable {
  constructor(readonly claims: readonly Claim[]) {}

  release(): void {
    for (const c of this.claims) c.release();
  }

  [Symbol.dispose](): void {
    this.release();
  }
}
