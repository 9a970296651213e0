import { LAG_TOPICS_PER_SECOND, LagTurns } from '../../src/replica/replica-gauges';

describe('consumer lag reads', () => {
  test('a few owned topics are all read at every tick', () => {
    const turns = new LagTurns();
    expect(turns.next(['b', 'a', 'b'])).toEqual(['a', 'b']);
    expect(turns.next(['b', 'a'])).toEqual(['a', 'b']);
  });

  test('with more owned topics than a tick reads, each tick reads the next ones and every topic comes round (none starved)', () => {
    const topics = Array.from({ length: 25 }, (_, i) => `t${String(i).padStart(2, '0')}`);
    const turns = new LagTurns();
    const seen = new Map<string, number>();
    for (let tick = 0; tick < 5; tick++) {
      const read = turns.next(topics);
      expect(read).toHaveLength(LAG_TOPICS_PER_SECOND);
      for (const t of read) seen.set(t, (seen.get(t) ?? 0) + 1);
    }
    // 5 ticks × 10 topics over 25 topics: each topic read exactly twice.
    expect([...seen.values()].every((n) => n === 2)).toBe(true);
    expect(seen.size).toBe(25);
  });

  test('a topic lost between ticks does not stall the turn: the next read starts after it', () => {
    const turns = new LagTurns();
    const topics = Array.from({ length: 12 }, (_, i) => `t${String(i).padStart(2, '0')}`);
    expect(turns.next(topics, 5)).toEqual(['t00', 't01', 't02', 't03', 't04']);
    const without = topics.filter((t) => t !== 't04' && t !== 't05');
    expect(turns.next(without, 5)).toEqual(['t06', 't07', 't08', 't09', 't10']);
    expect(turns.next(without, 5)).toEqual(['t11', 't00', 't01', 't02', 't03']);
  });
});
