import * as avro from 'avsc';
import { MAX_PARSED_SCHEMAS } from '../../src/decode/registry-writer-schemas';
import type { WriterSchema } from '../../src/schema-registry/wire-format';
import { framed } from '../support/avro-fixtures';
import { decoder, msg } from './fixture';

const SCHEMA = { type: 'record', name: 'Log', fields: [{ name: 'n', type: 'long' }] };
const known = (id: number): WriterSchema => ({ id, schemaType: 'AVRO', schema: JSON.stringify(SCHEMA) });
const unknown = (id: number): WriterSchema => ({ id, unknown: 'Schema not found' });
const payload = new Uint8Array(avro.Type.forSchema(SCHEMA as avro.Schema).toBuffer({ n: 1 }));
/** Only the 5-byte header: what a producer churning schema ids sends. */
const headerOnly = (id: number) => framed(id, new Uint8Array(0));
const ids = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

describe('writer schemas under schema-id churn', () => {
  test('a batch with more distinct unknown schema ids than the cache holds makes each record an unknown-schema-id dead letter', () => {
    const churn = ids(1, MAX_PARSED_SCHEMAS + 1);
    const out = decoder({ format: 'avro' }).decode(
      't',
      0,
      churn.map((id, i) => msg(i, headerOnly(id))),
      '',
      churn.map(unknown),
    );
    expect(out.batch).toBeUndefined();
    expect(out.deadLetters).toHaveLength(churn.length);
    expect(new Set(out.deadLetters.map((d) => d.reason))).toEqual(new Set(['unknown-schema-id']));
  });

  test('a known schema id sent again with a later batch is not the one evicted for that batch’s new ids', () => {
    const d = decoder({ format: 'avro' });
    // The cache is full; id 1 is its oldest entry.
    d.decode('t', 0, [], '', ids(1, MAX_PARSED_SCHEMAS).map(known));
    const out = d.decode('t', 0, [msg(0, framed(1, payload)), msg(1, framed(5000, payload))], '', [
      known(1),
      known(5000),
    ]);
    expect(out.deadLetters).toEqual([]);
    expect(out.batch!.numRows).toBe(2);
  });

  test('registry-format keys with churning schema ids are dead letters, and the values of the batch still decode', () => {
    const d = decoder({ format: 'avro', includeKey: true, keyFormat: 'avro' });
    const churn = ids(10_000, MAX_PARSED_SCHEMAS + 1);
    const messages = churn.map((id, i) => ({ ...msg(i, framed(1, payload)), key: headerOnly(id) }));
    const out = d.decode('t', 0, messages, '', [known(1), ...churn.map(unknown)]);
    expect(out.deadLetters).toHaveLength(churn.length);
    expect(new Set(out.deadLetters.map((r) => r.reason))).toEqual(new Set(['unknown-schema-id']));
  });

  test('an id the batch did not bring is an unknown-schema-id dead letter, not a staging failure', () => {
    const out = decoder({ format: 'avro' }).decode('t', 0, [msg(0, framed(42, payload))], '', []);
    expect(out.deadLetters).toEqual([expect.objectContaining({ offset: 0, reason: 'unknown-schema-id' })]);
  });
});
