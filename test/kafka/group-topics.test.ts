import { matchingTopics } from '../../src/kafka/group-topics';

describe('the topics a consumer reads', () => {
  const existing = ['orders.eu', 'orders.us', 'audit', 'orders', 'xorders.eu', '__consumer_offsets'];

  test('named topics first, then the pattern matches in name order, each once', () => {
    expect(
      matchingTopics({ topics: ['orders.us', 'audit'], topicPatterns: ['^orders\\..+$'] }, existing),
    ).toEqual(['orders.us', 'audit', 'orders.eu']);
  });

  test('a pattern is unanchored unless written with ^ and $', () => {
    expect(matchingTopics({ topics: undefined, topicPatterns: ['orders\\.eu'] }, existing)).toEqual([
      'orders.eu',
      'xorders.eu',
    ]);
  });

  test('a pattern that matches nothing yet gives no topic, not an error', () => {
    expect(matchingTopics({ topics: undefined, topicPatterns: ['^tenant\\.'] }, existing)).toEqual([]);
  });
});
