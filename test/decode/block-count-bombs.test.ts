import path from 'node:path';
import { runBounded } from '../support/run-bounded';

/**
 * A producer's corrupted array or map count (Avro), or length (Protobuf), must make its record
 * a dead letter, not a decode that loops over billions of claimed items or allocates for
 * them. Without a guard such a decode never returns (or exhausts the heap), so the records
 * are decoded in a child process with a deadline and a small heap: a missing guard fails the
 * test (killed, or out of memory) instead of hanging the run.
 */

const root = path.resolve(__dirname, '../..');

interface Outcome {
  readonly rows: number;
  readonly dead: readonly { offset: number; reason: string; detail: string }[];
  readonly emptyItems?: number;
}

/** Runs `body` (JavaScript; `decoder`, `msg`, `avro`, `protobuf`, `framed`, `varint` in scope) in a bounded child; it prints an Outcome. */
function inChild(body: string): Outcome {
  const script = `
    const fs = require('node:fs');
    const ts = require('typescript');
    require.extensions['.ts'] = (m, file) => m._compile(ts.transpileModule(fs.readFileSync(file, 'utf8'), {
      compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 } }).outputText, file);
    const { decoder, msg } = require(${JSON.stringify(path.join(root, 'test/decode/fixture.ts'))});
    const avro = require('avsc');
    const protobuf = require('protobufjs');
    /** A zig-zag varint (Avro's long; Protobuf's sint64). */
    const zigzag = (n) => varint(n < 0 ? -2 * n - 1 : 2 * n);
    /** An unsigned varint of a non-negative safe integer. */
    const varint = (n) => { const out = []; while (n >= 128) { out.push((n % 128) | 128); n = Math.floor(n / 128); } out.push(n); return out; };
    const framed = (id, bytes) => { const h = Buffer.alloc(5); h.writeUInt32BE(id, 1); return new Uint8Array(Buffer.concat([h, Buffer.from(bytes)])); };
    const outcome = (out) => ({ rows: out.batch ? out.batch.numRows : 0,
      dead: out.deadLetters.map((d) => ({ offset: d.offset, reason: d.reason, detail: d.detail })) });
    ${body}
  `;
  const run = runBounded(process.execPath, ['--max-old-space-size=256', '-e', script], {
    cwd: root,
    timeoutMs: 60_000,
  });
  if (run.status !== 0 || run.timedOut)
    throw new Error(`the decoding child failed: ${run.stderr.slice(-2000)}`);
  return JSON.parse(run.stdout) as Outcome;
}

const HUGE = 2 ** 31;

describe('corrupted counts and lengths are dead letters, never a decode of billions of items', () => {
  test('an Avro array or map block count beyond the bytes left, positive or negative, after a good record of the schema', () => {
    const out = inChild(`
      const longs = { type: 'record', name: 'A', fields: [{ name: 'xs', type: { type: 'array', items: 'long' } }] };
      const strings = { type: 'record', name: 'M', fields: [{ name: 'm', type: { type: 'map', values: 'string' } }] };
      const good = (schema, value) => Array.from(avro.Type.forSchema(schema).toBuffer(value));
      const d = decoder({ format: 'avro' });
      const out = d.decode('t', 0, [
        msg(0, framed(1, good(longs, { xs: [1, 2, 3] }))),
        msg(1, framed(1, [...zigzag(${HUGE}), 2, 4, 0])),
        // A negative count: its absolute value is the count, a byte size follows.
        msg(2, framed(1, [...zigzag(-${HUGE}), ...zigzag(2), 2, 4, 0])),
        msg(3, framed(2, good(strings, { m: { a: 'x' } }))),
        msg(4, framed(2, [...zigzag(${HUGE}), 2, 0x61, 0, 0])),
        msg(5, framed(1, good(longs, { xs: [4] }))),
      ], '', [
        { id: 1, schemaType: 'AVRO', schema: JSON.stringify(longs) },
        { id: 2, schemaType: 'AVRO', schema: JSON.stringify(strings) },
      ]);
      process.stdout.write(JSON.stringify(outcome(out)));
    `);
    expect(out.rows).toBe(3);
    expect(out.dead.map((d) => [d.offset, d.reason])).toEqual([
      [1, 'undecodable-payload'],
      [2, 'undecodable-payload'],
      [4, 'undecodable-payload'],
    ]);
    for (const d of out.dead)
      expect(d.detail).toMatch(/a block count of 2147483648 items \(at byte \d+\) where \d+ bytes are left/);
  });

  test('an Avro string length that is negative inside an array (avsc would read the count again, forever)', () => {
    const out = inChild(`
      const schema = { type: 'record', name: 'S', fields: [{ name: 'ss', type: { type: 'array', items: 'string' } }] };
      const d = decoder({ format: 'avro' });
      const out = d.decode('t', 0, [
        msg(0, framed(1, Array.from(avro.Type.forSchema(schema).toBuffer({ ss: ['a'] })))),
        msg(1, framed(1, [...zigzag(1), ...zigzag(-2), 0])),
      ], '', [{ id: 1, schemaType: 'AVRO', schema: JSON.stringify(schema) }]);
      process.stdout.write(JSON.stringify(outcome(out)));
    `);
    expect(out.rows).toBe(1);
    expect(out.dead).toEqual([
      {
        offset: 1,
        reason: 'undecodable-payload',
        detail: expect.stringMatching(/negative length -2/) as unknown,
      },
    ]);
  });

  test('Avro arrays of items that take no bytes are bounded by a count of such items, not by the bytes', () => {
    const out = inChild(`
      const { MAX_EMPTY_ITEMS } = require(${JSON.stringify(path.join(root, 'src/decode/avro/block-counts.ts'))});
      const empty = { type: 'record', name: 'E', fields: [] };
      const flat = { type: 'record', name: 'F', fields: [{ name: 'es', type: { type: 'array', items: empty } }] };
      const nested = { type: 'record', name: 'N', fields: [{ name: 'ess', type: { type: 'array', items: { type: 'array', items: empty } } }] };
      // 200,000 inner arrays of 100,000 empty records each: 800 KB claiming 2 * 10^10 items.
      const inner = [...zigzag(100000), 0];
      const bomb = [...zigzag(200000)];
      for (let i = 0; i < 200000; i++) bomb.push(...inner);
      bomb.push(0);
      const d = decoder({ format: 'avro' });
      const out = d.decode('t', 0, [
        msg(0, framed(1, [...zigzag(1000), 0])),
        msg(1, framed(1, [...zigzag(${HUGE}), 0])),
        msg(2, framed(2, [...zigzag(2), ...zigzag(3), 0, ...zigzag(4), 0, 0])),
        msg(3, framed(2, bomb)),
      ], '', [
        { id: 1, schemaType: 'AVRO', schema: JSON.stringify(flat) },
        { id: 2, schemaType: 'AVRO', schema: JSON.stringify(nested) },
      ]);
      const lengths = (name) => { const c = out.batch.getChild(name); return [0, 1].map((i) => c.get(i)?.length ?? null); };
      process.stdout.write(JSON.stringify({ ...outcome(out), emptyItems: MAX_EMPTY_ITEMS, es: lengths('es') }));
    `) as Outcome & { es: (number | null)[] };
    // The records within the bound are read, every item of them.
    expect(out.rows).toBe(2);
    expect(out.es).toEqual([1000, null]);
    expect(out.dead.map((d) => [d.offset, d.reason])).toEqual([
      [1, 'undecodable-payload'],
      [3, 'undecodable-payload'],
    ]);
    for (const d of out.dead)
      expect(d.detail).toContain(`more than ${out.emptyItems} items that take no bytes`);
  });

  test('Protobuf lengths beyond the bytes left: packed repeated, strings, nested messages', () => {
    const out = inChild(`
      const proto = 'syntax = "proto3"; message P { repeated int64 xs = 1; string s = 2; Inner in = 3; repeated Inner ins = 4; } message Inner { repeated sint32 a = 1; }';
      const root = protobuf.parse(proto, { keepCase: true }).root;
      const P = root.lookupType('P');
      const good = Array.from(P.encode(P.fromObject({ xs: [1, 2], s: 'x', in: { a: [1] }, ins: [{ a: [2] }] })).finish());
      const d = decoder({ format: 'protobuf' });
      const out = d.decode('t', 0, [
        msg(0, framed(1, [0, ...good])),
        msg(1, framed(1, [0, 0x0a, ...varint(${HUGE}), 2, 4])), // packed xs
        msg(2, framed(1, [0, 0x12, ...varint(${HUGE}), 0x61])), // s
        msg(3, framed(1, [0, 0x1a, ...varint(${HUGE}), 0x0a, ...varint(${HUGE}), 2])), // in, its packed a
        msg(4, framed(1, [0, 0x22, 2, 0x0a, ...varint(2 ** 32 - 1)])), // ins[0].a, a length of 2^32 - 1
      ], '', [{ id: 1, schemaType: 'PROTOBUF', schema: proto }]);
      process.stdout.write(JSON.stringify(outcome(out)));
    `);
    expect(out.rows).toBe(1);
    expect(out.dead.map((d) => [d.offset, d.reason])).toEqual([
      [1, 'undecodable-payload'],
      [2, 'undecodable-payload'],
      [3, 'undecodable-payload'],
      [4, 'undecodable-payload'],
    ]);
    for (const d of out.dead) expect(d.detail).toMatch(/the payload is not a P message: index out of range/);
  });
});
