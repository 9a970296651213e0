import type { DeadLetterVerdict } from '../../src/dead-letters/dead-letter-reason';
import { DeadLetterWindow, MIN_JUDGED_RECORDS } from '../../src/dead-letters/dead-letter-window';

const WINDOW = 1_000;
const RATIO = 0.1;
const bad = (offset: number): DeadLetterVerdict => ({
  offset,
  reason: 'schema-mismatch',
  field: 'n',
  detail: 'not a number',
});
const offsets = (count: number) => Array.from({ length: count }, (_, i) => i);
const allBad = (count: number) => new Map(offsets(count).map((o) => [o, bad(o)]));

/**
 * A definition that matches nothing, on many partitions each smaller than
 * MIN_JUDGED_RECORDS: no partition's window ever judges, so only the replica-wide window
 * (the records of partitions whose windows are still filling) can stop it.
 */
test('a definition matching nothing on many small partitions is stopped by the replica-wide window', () => {
  const replica = new DeadLetterWindow(WINDOW, RATIO);
  const perPartition = 80;
  expect(perPartition).toBeLessThan(MIN_JUDGED_RECORDS);
  const stopped: number[] = [];
  let committed = 0;
  for (let partition = 0; partition < 200; partition++) {
    const window = new DeadLetterWindow(WINDOW, RATIO, replica);
    const exceeded = window.record(offsets(perPartition), allBad(perPartition));
    if (exceeded) {
      stopped.push(partition);
      // Nothing from its first dead letter on is committed; each stops at its own offsets.
      expect(exceeded.firstOffending).toBe(0);
      expect(exceeded.common).toEqual(expect.objectContaining({ reason: 'schema-mismatch', field: 'n' }));
    } else committed += perPartition;
  }
  // Only the records before the replica-wide window judged went through (one partition's 80).
  expect(committed).toBeLessThan(MIN_JUDGED_RECORDS);
  expect(stopped).toHaveLength(199);
});

test('without a replica-wide window, the same partitions are all dead-lettered (the hazard)', () => {
  let exceededAny = false;
  for (let partition = 0; partition < 200; partition++)
    if (new DeadLetterWindow(WINDOW, RATIO).record(offsets(80), allBad(80))) exceededAny = true;
  expect(exceededAny).toBe(false);
});

test('a filling partition with no dead letter of its own goes on while the replica-wide window is over its share', () => {
  const replica = new DeadLetterWindow(WINDOW, RATIO);
  expect(new DeadLetterWindow(WINDOW, RATIO, replica).record(offsets(90), allBad(90))).toBeUndefined();
  expect(new DeadLetterWindow(WINDOW, RATIO, replica).record(offsets(90), allBad(90))).toBeDefined();
  const good = new DeadLetterWindow(WINDOW, RATIO, replica);
  expect(good.record(offsets(50), new Map())).toBeUndefined();
});

test('a partition judged on its own window no longer feeds the replica-wide one: its many good records do not hide small bad partitions', () => {
  const replica = new DeadLetterWindow(WINDOW, RATIO);
  // A healthy partition: its first MIN_JUDGED_RECORDS records count replica-wide, the rest do not.
  const healthy = new DeadLetterWindow(WINDOW, RATIO, replica);
  expect(healthy.record(offsets(5_000), new Map())).toBeUndefined();
  // 12 of 112 is over 10% (12 of the 1,000 it would hold had the healthy one fed it all is not).
  const small = new DeadLetterWindow(WINDOW, RATIO, replica);
  expect(small.record(offsets(12), allBad(12))).toEqual(
    expect.objectContaining({ deadLetters: 12, records: MIN_JUDGED_RECORDS + 12 }),
  );
});
