/**
 * Which group generation this process is in, as its own code has taken it in.
 *
 * kafkajs learns a new generation in SyncGroup, swaps its offset manager, and only
 * then emits GROUP_JOIN (without the generation id). The coordinator hook reports
 * each SyncGroup answer (`synced`); the GROUP_JOIN handler then takes it (`joined`).
 * Between the two, kafkajs may already send commits in the new generation while our
 * assignment still says the old one: the commit fence refuses exactly those.
 */
export interface Generation {
  /** Counts this process's joins: a claim or commit decided under an older one is stale. */
  readonly sequence: number;
  readonly memberId: string;
  readonly generationId: number;
}

export class GroupMembership {
  #synced: { memberId: string; generationId: number } | undefined;
  #current: Generation | undefined;
  #sequence = 0;

  /** The coordinator answered a SyncGroup for this member and generation. */
  synced(memberId: string, generationId: number): void {
    this.#synced = { memberId, generationId };
  }

  /** The GROUP_JOIN handler runs: the last synced generation is now the one we act in. */
  joined(): Generation {
    this.#sequence += 1;
    const s = this.#synced;
    // No SyncGroup seen (the hook is not attached): a generation nothing can match, so every commit is refused.
    this.#current = {
      sequence: this.#sequence,
      memberId: s?.memberId ?? '',
      generationId: s?.generationId ?? -1,
    };
    return this.#current;
  }

  get current(): Generation | undefined {
    return this.#current;
  }

  isCurrent(g: Generation): boolean {
    return this.#current?.sequence === g.sequence;
  }
}
