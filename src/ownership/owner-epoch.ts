/**
 * One ownership period of one process: the identity every other record of ownership is
 * built on. A process instance (`owner`, unique per process start) bumps its `epoch` at
 * each of its group joins; staging stamps the pair on every part it writes
 * (staging/epoch.ts), and the ownership chain of each partition records it with the
 * offset the period started at (chain.ts), so a part maps to exactly one entry of each
 * of its partitions' chains (DESIGN.md, "Ceiling rule").
 *
 * Imports nothing: staging, a lower floor than the ownership rules, uses it too.
 */
export interface OwnerEpoch {
  /** The process instance (unique per process start). */
  readonly owner: string;
  /** Increases on every change of this instance's assignment (each group join). */
  readonly epoch: number;
}
