import type { RecordBatch } from 'apache-arrow';
import { RecordDecoder, type RawMessage } from '../../src/decode/record-decoder';
import type { WriterSchema } from '../../src/schema-registry/wire-format';
import { base, NOW } from './fixture';

/**
 * The compiled registry-format readers are proven by decoding the same batches twice: once
 * with the compiled reader and once with the reference decoder (avsc, protobufjs), and
 * comparing every row, schema, earlier segment and dead letter. Rows are compared as text in
 * which a bigint, -0, NaN and bytes stay distinguishable.
 */
export function rowsOf(b: RecordBatch | undefined): string[] {
  return (b?.toArray() ?? []).map((row) =>
    JSON.stringify(row.toJSON(), (_k, v: unknown) =>
      typeof v === 'bigint'
        ? `${v}n`
        : typeof v === 'number' && (Object.is(v, -0) || Number.isNaN(v))
          ? String(v)
          : v instanceof Uint8Array
            ? Buffer.from(v).toString('hex')
            : v,
    ),
  );
}

export function decodeBoth(format: 'avro' | 'protobuf', batches: RawMessage[][], schemas: WriterSchema[]) {
  const compiled = new RecordDecoder({ ...base, format }, () => NOW, 'native');
  const reference = new RecordDecoder({ ...base, format }, () => NOW, 'typescript');
  const outputs = [compiled, reference].map((d) =>
    batches.map((messages) => {
      const out = d.decode('t', 0, messages, 'id', schemas);
      return {
        rows: rowsOf(out.batch),
        schema: out.batch?.schema.fields.map((f) => `${f.name}: ${String(f.type)} ${f.nullable}`),
        earlier: out.earlier.map((s) => rowsOf(s.batch)),
        deadLetters: out.deadLetters,
        count: out.rows,
      };
    }),
  );
  return { compiled: outputs[0], reference: outputs[1] };
}
