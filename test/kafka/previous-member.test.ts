import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { memberRecordFile, PreviousMember, type LeaveGroup } from '../../src/kafka/previous-member';

let dir: string;
beforeEach(async () => {
  dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'kl-previous-member-'));
});
afterEach(() => fsp.rm(dir, { recursive: true, force: true }));

function logged(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'info' },
    { write: (s: string) => lines.push(JSON.parse(s) as Record<string, unknown>) },
  );
  return { logger, lines };
}

function recordingLeave(answer: () => Promise<void> = () => Promise.resolve()) {
  const left: [string, string][] = [];
  const leave: LeaveGroup = async (groupId, memberId) => {
    left.push([groupId, memberId]);
    await answer();
  };
  return { left, leave };
}

test('a crash leaves the last join on the data directory: the next start leaves the group as that member, then forgets it', async () => {
  const crashed = new PreviousMember(dir, 'group-a', logged().logger);
  crashed.joined('member-1', 4);
  crashed.joined('member-2', 5); // a rejoin: the newer record wins
  await until(async () => (await crashed.read())?.memberId === 'member-2');

  const { left, leave } = recordingLeave();
  await new PreviousMember(dir, 'group-a', logged().logger).leaveIfLeftBehind(leave);
  expect(left).toEqual([['group-a', 'member-2']]);
  await expect(fsp.access(memberRecordFile(dir))).rejects.toThrow();
});

test('a graceful stop forgets its member, even with a record write still in flight: the next start leaves nobody', async () => {
  const stopped = new PreviousMember(dir, 'group-a', logged().logger);
  stopped.joined('member-1', 1);
  await stopped.forget();
  const { left, leave } = recordingLeave();
  await new PreviousMember(dir, 'group-a', logged().logger).leaveIfLeftBehind(leave);
  expect(left).toEqual([]);
});

test('a member of another group (the definition changed its group) is not left from this one', async () => {
  const old = new PreviousMember(dir, 'group-old', logged().logger);
  old.joined('member-1', 1);
  await until(async () => (await old.read()) !== undefined);
  const { left, leave } = recordingLeave();
  await new PreviousMember(dir, 'group-new', logged().logger).leaveIfLeftBehind(leave);
  expect(left).toEqual([]);
  await expect(fsp.access(memberRecordFile(dir))).rejects.toThrow();
});

test('an old member the coordinator no longer knows (its session expired) counts as left; any other failure is a warning and the start goes on', async () => {
  for (const [error, level] of [
    [Object.assign(new Error('unknown member'), { type: 'UNKNOWN_MEMBER_ID' }), 30],
    [new Error('coordinator not available'), 40],
  ] as const) {
    const old = new PreviousMember(dir, 'g', logged().logger);
    old.joined('m', 1);
    await until(async () => (await old.read()) !== undefined);
    const { logger, lines } = logged();
    await new PreviousMember(dir, 'g', logger).leaveIfLeftBehind(() => Promise.reject(error));
    expect(lines.find((l) => l.event === 'group.previousMember')?.level).toBe(level);
    await expect(fsp.access(memberRecordFile(dir))).rejects.toThrow();
  }
});

test('an unreadable record is dropped without a leave', async () => {
  await fsp.writeFile(memberRecordFile(dir), '{"groupId": "g", "memb');
  const { left, leave } = recordingLeave();
  await new PreviousMember(dir, 'g', logged().logger).leaveIfLeftBehind(leave);
  expect(left).toEqual([]);
  await expect(fsp.access(memberRecordFile(dir))).rejects.toThrow();
});

async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200 && !(await check()); i++) await new Promise((r) => setTimeout(r, 10));
}
