import { RecordDecoder } from '../../src/decode/record-decoder';
import { base, column, msg, NOW } from './fixture';

/**
 * A batch's builders take room up front from what a row took in the column's last batch. One
 * record near maxRecordBytes followed by a batch of many small ones must not make the second
 * batch ask for (rows × the large row) bytes: 50,000 × 1 MB would be ~56 GB, and the whole
 * batch failed to decode.
 */
test('one large record, then many small ones: the next batch reserves no more than its own bytes', () => {
  const decoder = new RecordDecoder({ ...base }, () => NOW, 'typescript');
  const large = decoder.decode('t', 0, [msg(0, JSON.stringify({ s: 'x'.repeat(1_000_000) }))]);
  expect(large.rows).toBe(1);
  const small = Array.from({ length: 50_000 }, (_, i) => msg(1 + i, JSON.stringify({ s: 'y' })));
  const out = decoder.decode('t', 0, small);
  expect(out.deadLetters).toEqual([]);
  expect(out.batch!.numRows).toBe(50_000);
  expect(column(out.batch!, 's').slice(0, 2)).toEqual(['y', 'y']);
});
