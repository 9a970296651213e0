/**
 * Generated Avro writer schemas and datums (edge values, invalid UTF-8, out-of-range indexes),
 * shared by the tests of the compiled reader and of its native twin.
 */
export type Schema = string | readonly Schema[] | { readonly [key: string]: unknown };

export { SeededRandom as Random } from '../support/seeded-random';
import type { SeededRandom as Random } from '../support/seeded-random';

let names = 0;
const named = (prefix: string) => `${prefix}${names++}`;

export function schemaOf(r: Random, depth: number): Schema {
  const scalars: (() => Schema)[] = [
    () => 'boolean',
    () => 'int',
    () => 'long',
    () => 'float',
    () => 'double',
    () => 'string',
    () => 'bytes',
    () => ({ type: 'enum', name: named('E'), symbols: ['A', 'B', 'C_1'] }),
    () => ({ type: 'fixed', name: named('F'), size: r.pick([1, 4]) }),
    () => ({
      type: 'bytes',
      logicalType: 'decimal',
      precision: r.pick([1, 9, 18, 38]),
      scale: r.pick([0, 2]),
    }),
    () => ({
      type: 'fixed',
      name: named('D'),
      size: r.pick([1, 8, 16]),
      logicalType: 'decimal',
      precision: 10,
      scale: 1,
    }),
    () => ({ type: 'int', logicalType: 'date' }),
    () => ({ type: 'int', logicalType: 'time-millis' }),
    () => ({ type: 'long', logicalType: 'time-micros' }),
    () => ({ type: 'long', logicalType: r.pick(['timestamp-millis', 'timestamp-micros']) }),
    () => ({ type: 'long', logicalType: r.pick(['local-timestamp-millis', 'local-timestamp-micros']) }),
    () => ({ type: 'string', logicalType: 'uuid' }),
  ];
  const nested: (() => Schema)[] = [
    () => ['null', schemaOf(r, depth + 1)].filter((s) => !Array.isArray(s)),
    () => [schemaOf(r, depth + 1), 'null'].filter((s) => !Array.isArray(s)),
    () => ({ type: 'array', items: schemaOf(r, depth + 1) }),
    () => ({ type: 'map', values: schemaOf(r, depth + 1) }),
    () => recordOf(r, depth + 1),
    () => ['null', 'int', 'string'],
    () => [r.pick(['int', 'string'])],
  ];
  return depth < 2 && r.next() < 0.35 ? r.pick(nested)() : r.pick(scalars)();
}

export function recordOf(r: Random, depth: number): Schema {
  const fields = Array.from({ length: 1 + r.int(4) }, (_, i) => ({
    name: `f${i}`,
    type: schemaOf(r, depth),
  }));
  return { type: 'record', name: named('R'), fields };
}

/**
 * Avro's zig-zag varint of any integer (also beyond int64, which readers must refuse or wrap),
 * `pad` bytes longer than it need be (an overlong form: zero groups with the continuation bit).
 */
export function varint(out: number[], n: bigint, pad = 0): void {
  let z = n >= 0n ? n << 1n : (-n << 1n) - 1n;
  const groups: number[] = [];
  while (z >= 0x80n) {
    groups.push(Number(z & 0x7fn));
    z >>= 7n;
  }
  groups.push(Number(z));
  for (let i = 0; i < pad; i++) groups.push(0);
  groups.forEach((g, i) => out.push(i < groups.length - 1 ? g | 0x80 : g));
}

/** Mostly none; now and then an overlong varint of 1 to 6 extra bytes. */
const padOf = (r: Random) => (r.next() < 0.06 ? 1 + r.int(6) : 0);

/** Float bit patterns at the edges: infinities, NaNs, -0, the smallest subnormals. */
const FLOAT_EDGES: readonly (readonly number[])[] = [
  [0x00, 0x00, 0x80, 0x7f],
  [0x00, 0x00, 0x80, 0xff],
  [0x01, 0x00, 0xc0, 0x7f],
  [0x00, 0x00, 0x00, 0x80],
  [0x01, 0x00, 0x00, 0x00],
];
const DOUBLE_EDGES: readonly (readonly number[])[] = [
  [0, 0, 0, 0, 0, 0, 0xf0, 0x7f],
  [0, 0, 0, 0, 0, 0, 0xf0, 0xff],
  [1, 0, 0, 0, 0, 0, 0xf8, 0x7f],
  [0, 0, 0, 0, 0, 0, 0, 0x80],
  [1, 0, 0, 0, 0, 0, 0, 0],
];

const INTS = [
  0n,
  -1n,
  1n,
  63n,
  -64n,
  64n,
  2n ** 27n - 1n,
  2n ** 27n,
  -(2n ** 31n),
  2n ** 31n - 1n,
  2n ** 31n,
];
const LONGS = [
  0n,
  -1n,
  2n ** 48n,
  // Zig-zag to 2^53 - 1 and 2^53: the last exact varint as a JavaScript number, and the first not.
  -(2n ** 52n),
  2n ** 52n,
  2n ** 53n - 1n,
  2n ** 53n,
  2n ** 53n + 1n,
  -(2n ** 63n),
  2n ** 63n - 1n,
  2n ** 64n,
  -62_167_219_200_000n,
  253_402_300_799_999n,
  253_402_300_800_000n,
  1_764_676_800_123n,
  1_764_676_800_123_456n,
  -719_528n,
  2_932_896n,
  2_932_897n,
];
const TEXTS: readonly number[][] = [
  [],
  [0x61],
  [...Buffer.from('héllo')],
  [...Buffer.from('日本😀')],
  [0xff],
  [0xc3],
  [0xed, 0xa0, 0x80],
  [...Buffer.from('1')],
  [...Buffer.from('__proto__')],
];

export function datum(r: Random, schema: Schema, out: number[]): void {
  if (Array.isArray(schema)) {
    const i = r.next() < 0.05 ? r.pick([-1, schema.length]) : r.int(schema.length);
    varint(out, BigInt(i), padOf(r));
    const branch = schema[i] as Schema | undefined;
    if (branch !== undefined && branch !== 'null') datum(r, branch, out);
    return;
  }
  const s = typeof schema === 'string' ? { type: schema } : (schema as Record<string, unknown>);
  switch (s.type) {
    case 'boolean':
      out.push(r.pick([0, 1, 1, 0, 2]));
      return;
    case 'int':
      varint(out, r.next() < 0.5 ? r.pick(INTS) : BigInt(r.int(2 ** 31) - 2 ** 30), padOf(r));
      return;
    case 'long':
      varint(out, r.next() < 0.6 ? r.pick(LONGS) : BigInt(Math.floor((r.next() - 0.5) * 2 ** 54)), padOf(r));
      return;
    case 'float':
    case 'double': {
      const b = Buffer.alloc(s.type === 'float' ? 4 : 8);
      if (r.next() < 0.15) b.set(r.pick(s.type === 'float' ? FLOAT_EDGES : DOUBLE_EDGES));
      else if (r.next() < 0.2) for (let i = 0; i < b.length; i++) b[i] = r.int(256);
      else if (s.type === 'float') b.writeFloatLE((r.next() - 0.5) * 1e6);
      else b.writeDoubleLE((r.next() - 0.5) * 1e12);
      out.push(...b);
      return;
    }
    case 'string':
    case 'bytes': {
      const bytes =
        s.logicalType === 'decimal'
          ? Array.from({ length: r.pick([0, 1, 3, 8, 16, 17]) }, () => r.int(256))
          : r.pick(TEXTS);
      varint(out, BigInt(bytes.length), padOf(r));
      out.push(...bytes);
      return;
    }
    case 'enum':
      varint(out, BigInt(r.next() < 0.1 ? 3 : r.int(3)), padOf(r));
      return;
    case 'fixed':
      for (let i = 0; i < (s.size as number); i++) out.push(r.int(256));
      return;
    case 'array':
    case 'map': {
      const blocks = r.int(3);
      for (let b = 0; b < blocks; b++) {
        const n = 1 + r.int(3);
        const items: number[] = [];
        for (let i = 0; i < n; i++) {
          if (s.type === 'map') {
            const key = r.pick([[0x61], [0x62], [0x31], [...Buffer.from('__proto__')], [0xc3, 0xa9], [0xff]]);
            varint(items, BigInt(key.length));
            items.push(...key);
            datum(r, s.values as Schema, items);
          } else datum(r, s.items as Schema, items);
        }
        if (r.next() < 0.3) {
          varint(out, BigInt(-n));
          varint(out, BigInt(items.length));
        } else varint(out, BigInt(n));
        out.push(...items);
      }
      out.push(0);
      return;
    }
    case 'record':
      for (const f of s.fields as { type: Schema }[]) datum(r, f.type, out);
      return;
    default:
      datum(r, s.type as Schema, out);
  }
}

export function framed(id: number, payload: number[]): Uint8Array {
  return Uint8Array.from([0, 0, 0, 0, id, ...payload]);
}
