import { Field, FixedSizeList, Float16, Float32, Uint8, util, type DataType } from 'apache-arrow';
import type { VectorElement } from '../config';
import { fromBase64 } from './base64';
import { INVALID, Invalid, type Converted, type FieldCodec } from './field-codec';
import { VectorBuilder } from './nested-builders';

/** A vector column (typed-codecs.ts says what it accepts). */
type VectorArray = Float32Array | Uint16Array | Uint8Array;

const ELEMENTS: Readonly<
  Record<VectorElement, { arrow: () => DataType; bytes: number; create: (n: number) => VectorArray }>
> = {
  float32: { arrow: () => new Float32(), bytes: 4, create: (n) => new Float32Array(n) },
  float16: { arrow: () => new Float16(), bytes: 2, create: (n) => new Uint16Array(n) },
  uint8: { arrow: () => new Uint8(), bytes: 1, create: (n) => new Uint8Array(n) },
};

const FLOAT16_MAX = 65504;

export function vectorCodec(dim: number, element: VectorElement): FieldCodec {
  const spec = ELEMENTS[element];
  // The child is named "item" and nullable, as LanceDB's own vector columns are.
  const arrowType = new FixedSizeList(dim, new Field('item', spec.arrow(), true));
  const wrongDim = (actual: number) => new Invalid(`wrong dimension: expected ${dim}, got ${actual}`);
  const fromNumbers = (items: readonly unknown[]): Converted | Invalid => {
    if (items.length !== dim) return wrongDim(items.length);
    const out = spec.create(dim);
    for (let i = 0; i < dim; i++) {
      const x = items[i];
      if (typeof x !== 'number')
        return new Invalid(
          `element ${i} is ${x === null ? 'null' : typeof x}, not a number (dimension ${dim})`,
        );
      // JSON has no NaN or Infinity, but a transform can return them.
      if (!Number.isFinite(x)) return new Invalid(`element ${i} is ${x} (dimension ${dim})`);
      if (element === 'float32') {
        const f = Math.fround(x);
        if (!Number.isFinite(f)) return new Invalid(`element ${i} (${x}) is outside float32`);
        out[i] = f;
      } else if (element === 'float16') {
        if (Math.abs(x) > FLOAT16_MAX) return new Invalid(`element ${i} (${x}) is outside float16`);
        out[i] = util.float64ToUint16(x);
      } else {
        if (!Number.isInteger(x) || x < 0 || x > 255)
          return new Invalid(`element ${i} (${x}) is not a uint8`);
        out[i] = x;
      }
    }
    return out;
  };
  const fromBytes = (bytes: Uint8Array): Converted | Invalid => {
    if (bytes.byteLength !== dim * spec.bytes) {
      const actual = bytes.byteLength / spec.bytes;
      return new Invalid(
        `wrong dimension: expected ${dim}, got ${Number.isInteger(actual) ? actual : `${bytes.byteLength} bytes (${actual.toFixed(2)} ${element})`}`,
      );
    }
    // Copied into a fresh array: aligned for the element, and little-endian as JavaScript's
    // typed arrays are on every platform Node supports (x64, arm64).
    const out = spec.create(dim);
    new Uint8Array(out.buffer).set(bytes);
    if (element === 'float32') {
      const f = out as Float32Array;
      for (let i = 0; i < dim; i++)
        if (!Number.isFinite(f[i]!)) return new Invalid(`element ${i} is ${f[i]} (dimension ${dim})`);
    } else if (element === 'float16') {
      for (let i = 0; i < dim; i++)
        if ((out[i]! & 0x7c00) === 0x7c00)
          return new Invalid(`element ${i} is ${util.uint16ToFloat64(out[i]!)} (dimension ${dim})`);
    }
    return out;
  };
  return {
    arrowType: () => arrowType,
    builder: () => new VectorBuilder(arrowType, dim, spec.create),
    convert: (v) => {
      if (Array.isArray(v)) return fromNumbers(v as readonly unknown[]);
      if (typeof v === 'string') {
        const bytes = fromBase64(v);
        return bytes instanceof Invalid ? bytes : fromBytes(bytes);
      }
      if (v instanceof Float32Array && element === 'float32') return fromNumbers(Array.from(v));
      return v instanceof Uint8Array ? fromBytes(v) : INVALID;
    },
    append: (b, v) => (b as VectorBuilder<VectorArray>).append(v as VectorArray),
  };
}
