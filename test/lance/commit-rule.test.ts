import {
  commitsBesidePublications,
  countedOutcome,
  finalWithoutCount,
  publicationsInFlight,
} from '../../src/lance/commit-rule';

test('a fulfilled append is final without a count; a rejected add and every insert-if-absent are counted', () => {
  expect(finalWithoutCount('append', false)).toBe(true);
  expect(finalWithoutCount('append', true)).toBe(false);
  expect(finalWithoutCount('insert-if-absent', false)).toBe(false);
  expect(finalWithoutCount('insert-if-absent', true)).toBe(false);
});

test('an append found all, none or part in the table: published, written again, or not ours to repair', () => {
  for (const justWritten of [{ addFailed: true }, undefined]) {
    expect(countedOutcome('append', 10, 10, justWritten)).toBe('in-table');
    expect(countedOutcome('append', 0, 10, justWritten)).toBe('not-in');
    expect(countedOutcome('append', 4, 10, justWritten)).toBe('partial');
    expect(countedOutcome('append', 12, 10, justWritten)).toBe('partial');
  }
});

test('an insert-if-absent with part of its rows is written again; a surplus is explained only right after its own write resolved', () => {
  expect(countedOutcome('insert-if-absent', 4, 10, { addFailed: false })).toBe('not-in');
  expect(countedOutcome('insert-if-absent', 12, 10, { addFailed: false })).toBe('explain-surplus');
  expect(countedOutcome('insert-if-absent', 12, 10, { addFailed: true })).toBe('not-in');
  expect(countedOutcome('insert-if-absent', 12, 10, undefined)).toBe('not-in');
  expect(countedOutcome('insert-if-absent', 10, 10, undefined)).toBe('in-table');
});

test('a declared single writer keeps its commits one at a time: one publication in flight, no index build beside it', () => {
  expect(publicationsInFlight('atomic', true)).toBe(2);
  expect(publicationsInFlight('atomic', false)).toBe(1);
  expect(publicationsInFlight('single-writer', true)).toBe(1);
  expect(commitsBesidePublications('atomic')).toBe(true);
  expect(commitsBesidePublications('single-writer')).toBe(false);
});
