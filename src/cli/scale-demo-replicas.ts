import * as path from 'node:path';
import type { ReplicaProcess } from '../harness/replica-process';
import { freePort, scrape, startReplica, stopReplica, waitReady } from './demo';

/**
 * The scale demo's replicas, in start order: each one's process, metrics port, log and
 * how it ended. A restart is a new member on the data dir of the one it replaces.
 */

export interface Member {
  readonly label: string;
  readonly dataDir: string;
  readonly logFile: string;
  readonly port: number;
  readonly replica: ReplicaProcess;
  readonly startedAt: number;
  readonly restartOf?: string;
  endedAt?: number;
  /** 'killed' by the demo, or the exit code of a graceful stop. */
  end?: 'killed' | number | null;
  last: { staged: number; published: number; dead: number; lag: number };
}

/** What every replica of the demo runs with. */
export interface ReplicaLaunch {
  readonly brokers: readonly string[];
  readonly logsDir: string;
  readonly logLevel: string;
  /** The consumer definition they share. */
  readonly definition: string;
}

export class ScaleReplicas {
  readonly members: Member[] = [];

  constructor(private readonly launchWith: ReplicaLaunch) {}

  /** Starts a replica on `dataDir` and waits until it joined; it is a member (stopped at the end) from its spawn on. */
  async launch(label: string, dataDir: string, restartOf?: string): Promise<Member> {
    const { replica, port, logFile } = await spawnReplica(this.launchWith, label, dataDir);
    const m: Member = {
      label,
      dataDir,
      logFile,
      port,
      replica,
      startedAt: Date.now(),
      ...(restartOf ? { restartOf } : {}),
      last: { staged: 0, published: 0, dead: 0, lag: 0 },
    };
    this.members.push(m);
    await waitReady(replica, logFile);
    return m;
  }

  /** The members not yet killed or stopped. */
  live(): Member[] {
    return this.members.filter((m) => m.end === undefined);
  }

  kill(m: Member): void {
    m.replica.signal('SIGKILL');
    m.end = 'killed';
    m.endedAt = Date.now();
  }

  /** Each live member's counters from its /metrics, the last known ones when it does not answer. */
  async refresh(): Promise<void> {
    await Promise.all(
      this.live().map(async (m) => {
        m.last = await scrape(m.port).catch(() => m.last);
      }),
    );
  }

  /** Graceful stop of every live replica at once: each flushes, commits and finishes its publication. */
  async stopLive(): Promise<void> {
    await Promise.all(
      this.live().map(async (m) => {
        m.end = await stopReplica(m.replica);
        m.endedAt = Date.now();
      }),
    );
  }

  /** After a failure: whatever still runs is stopped, without recording how (the run is reported as failed). */
  async stopRemaining(): Promise<void> {
    await Promise.all(this.live().map((m) => stopReplica(m.replica)));
  }
}

/** The one place the demo spawns a replica process: `kafka-lance run` on its data dir, metrics on a free port. */
async function spawnReplica(
  l: ReplicaLaunch,
  label: string,
  dataDir: string,
): Promise<{ replica: ReplicaProcess; port: number; logFile: string }> {
  const port = await freePort();
  const logFile = path.join(l.logsDir, `${label}.log`);
  const replica = startReplica(l.brokers, dataDir, port, l.logLevel, logFile, l.definition);
  return { replica, port, logFile };
}
