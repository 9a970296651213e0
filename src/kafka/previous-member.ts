import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import type { Kafka } from 'kafkajs';
import { writeFileAtomically, unlinkDurably } from '../common/fs-durable';
import { withTimeout } from '../common/time-limit';
import type { Logger } from '../common/logger';
import { CoordinatorHookError } from './protocol/coordinator-hook';

/** The group membership a replica last joined with, as kept in its data directory. */
export interface MemberRecord {
  readonly groupId: string;
  readonly memberId: string;
  readonly generationId: number;
}

/** Sends LeaveGroup for `memberId` to the group's coordinator. */
export type LeaveGroup = (groupId: string, memberId: string) => Promise<void>;

/** The record's file in a data directory (one replica per data directory: data-dir-lock.ts). */
export function memberRecordFile(dataDir: string): string {
  return path.join(dataDir, 'group-member.json');
}

/** How long a start waits for the old member's leave before it goes on without it. */
const LEAVE_TIMEOUT_MS = 10_000;

/**
 * Ends the group membership of this data directory's previous process when it crashed.
 *
 * kafkajs 2.2.4 has no static membership: a replica restarted after a SIGKILL or an OOM
 * is a new member, and the coordinator keeps the dead one (and its partitions) until its
 * session expires, so the whole group waits `sessionTimeoutMs` before it rebalances.
 * Each join records its member id here; a graceful stop, which has left the group,
 * forgets it; a start that finds a record of its group sends LeaveGroup for that member
 * first, so the group rebalances as soon as the new member joins.
 *
 * Leaving is an optimisation, never a condition of the start: an old member the
 * coordinator no longer knows (its session expired) is already gone, and any other
 * failure is logged and the start goes on (the old session then expires as before).
 */
export class PreviousMember {
  readonly #file: string;
  readonly #groupId: string;
  readonly #logger: Logger;
  /** Record writes in join order: a later join's record is never overwritten by an earlier one. */
  #writes: Promise<void> = Promise.resolve();

  constructor(dataDir: string, groupId: string, logger: Logger) {
    this.#file = memberRecordFile(dataDir);
    this.#groupId = groupId;
    this.#logger = logger;
  }

  /** The membership a start finds, or undefined (none, or unreadable: then nothing can be left). */
  async read(): Promise<MemberRecord | undefined> {
    let text: string;
    try {
      text = await fsp.readFile(this.#file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    try {
      const parsed = JSON.parse(text) as Partial<MemberRecord>;
      if (
        typeof parsed.groupId === 'string' &&
        typeof parsed.memberId === 'string' &&
        typeof parsed.generationId === 'number'
      )
        return { groupId: parsed.groupId, memberId: parsed.memberId, generationId: parsed.generationId };
    } catch {
      // A torn or foreign file: written atomically, so not ours; dropped below.
    }
    return undefined;
  }

  /**
   * At start, before this process joins: leaves the group as the previous member of this
   * data directory, if the record names one of this group, then forgets the record.
   * Never throws.
   */
  async leaveIfLeftBehind(leave: LeaveGroup): Promise<void> {
    try {
      const record = await this.read();
      if (record?.groupId === this.#groupId) {
        const fields = { event: 'group.previousMember', groupId: record.groupId, memberId: record.memberId };
        try {
          await withTimeout(
            leave(record.groupId, record.memberId),
            LEAVE_TIMEOUT_MS,
            `no answer within ${LEAVE_TIMEOUT_MS} ms`,
          );
          this.#logger.info(
            { ...fields, generationId: record.generationId },
            'left the group as the member a crashed process of this data directory left behind',
          );
        } catch (error) {
          if (typeOf(error) === 'UNKNOWN_MEMBER_ID')
            this.#logger.info(
              fields,
              'the previous member of this data directory had already left the group',
            );
          else
            this.#logger.warn(
              { ...fields, err: error },
              'could not leave the group as the previous member: its partitions wait for its session to expire',
            );
        }
      }
      await this.#remove();
    } catch (error) {
      this.#logger.warn(
        { event: 'group.previousMember', err: error },
        'could not read or forget the member record',
      );
    }
  }

  /** A join of this process (SyncGroup answered): recorded durably, in the background. */
  joined(memberId: string, generationId: number): void {
    const record: MemberRecord = { groupId: this.#groupId, memberId, generationId };
    this.#writes = this.#writes.then(() =>
      writeFileAtomically(this.#file, JSON.stringify(record)).catch((error: unknown) =>
        this.#logger.warn(
          { event: 'group.memberRecord.failed', err: error },
          'could not record the group membership: a restart after a crash waits for its session',
        ),
      ),
    );
  }

  /** After a graceful leave: nothing is left behind. Waits for the writes in flight first. */
  async forget(): Promise<void> {
    await this.#writes;
    await this.#remove().catch((error: unknown) =>
      this.#logger.warn(
        { event: 'group.memberRecord.failed', err: error },
        'could not forget the member record',
      ),
    );
  }

  async #remove(): Promise<void> {
    try {
      await unlinkDurably(this.#file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
}

/**
 * LeaveGroup through a cluster of kafkajs's own (its private factory, as coordinator-hook.ts
 * reaches it): kafkajs has no public call to leave as another member.
 */
export function kafkaLeaveGroup(kafka: Kafka): LeaveGroup {
  return async (groupId, memberId) => {
    const target = kafka as unknown as Record<symbol, unknown>;
    const key = Object.getOwnPropertySymbols(kafka).find(
      (s) => s.description === 'private:Kafka:createCluster',
    );
    const create = key ? target[key] : undefined;
    if (typeof create !== 'function') throw new CoordinatorHookError('no private:Kafka:createCluster');
    const cluster = (create as (options: unknown) => InternalCluster)({ allowAutoTopicCreation: false });
    await cluster.connect();
    try {
      const coordinator = await cluster.findGroupCoordinator({ groupId });
      await coordinator.leaveGroup({ groupId, memberId });
    } finally {
      await cluster.disconnect();
    }
  };
}

interface InternalCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  findGroupCoordinator(request: { groupId: string }): Promise<{
    leaveGroup(request: { groupId: string; memberId: string }): Promise<unknown>;
  }>;
}

function typeOf(error: unknown): unknown {
  return (error as { type?: unknown } | null)?.type;
}
