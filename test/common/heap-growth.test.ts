import { tuneHeapGrowth } from '../../src/common/malloc-tuning';

test('a heap growth that is not a percentage stops the start, naming the variable', () => {
  for (const bad of ['75%', '0', '1000', ''])
    expect(() => tuneHeapGrowth({ KAFKA_LANCE_HEAP_GROWING_PERCENT: bad })).toThrow(
      `KAFKA_LANCE_HEAP_GROWING_PERCENT: ${bad} is not a percentage`,
    );
});
