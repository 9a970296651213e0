import { resolveConsumer } from '../../src/config';
import { fetchSizes } from '../../src/kafka/fetch-sizes';

const MiB = 1024 * 1024;

describe('kafkajs fetch sizes follow the staging queue budget', () => {
  test('a partition fetch holds whole record batches of up to the queue budget (a cut batch is sent and dropped)', () => {
    // The defaults: 16 MiB a partition and a fetch (4 MiB and kafkajs's 10 MiB cut 3 MiB batches of vectors).
    const queue = resolveConsumer(
      { name: 'c', brokers: ['127.0.0.1:1'], topics: ['t'], schema: 'infer' },
      'c',
    ).queue.maxBytes;
    expect(fetchSizes(queue)).toEqual({ maxBytesPerPartition: 16 * MiB, maxBytes: 16 * MiB });
  });

  test('a smaller queue budget makes fetches smaller: memory stays bounded by the one budget', () => {
    const sizes = fetchSizes(2 * MiB);
    expect(sizes.maxBytesPerPartition).toBe(2 * MiB);
    expect(sizes.maxBytes).toBe(2 * MiB);
  });
});
