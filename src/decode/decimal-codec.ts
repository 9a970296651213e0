import { Decimal } from 'apache-arrow';
import { DecimalBuilder } from './declared-builders';
import { INVALID, Invalid, type FieldCodec } from './field-codec';

/** A decimal(p, s) column (typed-codecs.ts says what it accepts). */
const DECIMAL = /^([+-]?)(\d+)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;

export function decimalCodec(precision: number, scale: number): FieldCodec {
  const arrowType = new Decimal(scale, precision, 128);
  const limit = 10n ** BigInt(precision);
  const label = `decimal(${precision}, ${scale})`;
  return {
    arrowType: () => arrowType,
    builder: () => new DecimalBuilder(arrowType),
    convert: (v) => {
      let text: string;
      if (typeof v === 'string') text = v;
      else if (typeof v === 'bigint') text = v.toString();
      else if (typeof v === 'number') {
        if (!Number.isFinite(v)) return new Invalid(`${v} is not a decimal`);
        text = String(v); // the shortest decimal that reads back as this double
      } else return INVALID;
      const m = text.length > 200 ? null : DECIMAL.exec(text);
      if (!m) return new Invalid(`${JSON.stringify(text.slice(0, 60))} is not a decimal number`);
      const fraction = m[3] ?? '';
      let unscaled = BigInt(`${m[2]}${fraction}`);
      if (unscaled === 0n) return 0n;
      // A power of ten is built only when its size is bounded by the digits at hand: an
      // exponent like 1e-999999 must be refused, not make a million-digit BigInt.
      const shift = scale - fraction.length + Number(m[4] ?? 0);
      const digits = unscaled.toString().length;
      if (shift >= 0) {
        if (digits + shift > precision)
          return new Invalid(`${text} overflows ${label} (more than ${precision} digits)`);
        unscaled *= 10n ** BigInt(shift);
      } else {
        const divisor = -shift > digits ? undefined : 10n ** BigInt(-shift);
        if (divisor === undefined || unscaled % divisor !== 0n)
          return new Invalid(`${text} has more than ${scale} fractional digits (${label} would round it)`);
        unscaled /= divisor;
      }
      if (unscaled >= limit) return new Invalid(`${text} overflows ${label} (more than ${precision} digits)`);
      return m[1] === '-' ? -unscaled : unscaled;
    },
    append: (b, v) => (b as DecimalBuilder).append(v as bigint),
  };
}
