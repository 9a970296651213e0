import { isUtf8 } from 'node:buffer';

/**
 * Whether bytes [start, end) of `buf` are well-formed UTF-8, exactly as node's `isUtf8` says
 * (the Unicode standard's table: no overlong forms, no surrogates, nothing past U+10FFFF), for
 * the compiled readers' strings. Short strings are checked here, byte by byte: `isUtf8` takes a
 * whole view, and a view object per string was the compiled readers' main allocation.
 */
export function utf8At(buf: Uint8Array, start: number, end: number): boolean {
  if (end - start > 256) return isUtf8(buf.subarray(start, end));
  let i = start;
  while (i < end) {
    const b = buf[i]!;
    if (b < 0x80) {
      i += 1;
      continue;
    }
    if (b < 0xc2) return false; // a continuation byte, or the lead of an overlong 2-byte form
    if (b < 0xe0) {
      if (i + 1 >= end || (buf[i + 1]! & 0xc0) !== 0x80) return false;
      i += 2;
      continue;
    }
    if (b < 0xf0) {
      if (i + 2 >= end) return false;
      const b1 = buf[i + 1]!;
      // E0 needs A0–BF (no overlong form), ED needs 80–9F (no surrogate).
      if ((b1 & 0xc0) !== 0x80 || (b === 0xe0 && b1 < 0xa0) || (b === 0xed && b1 >= 0xa0)) return false;
      if ((buf[i + 2]! & 0xc0) !== 0x80) return false;
      i += 3;
      continue;
    }
    if (b < 0xf5) {
      if (i + 3 >= end) return false;
      const b1 = buf[i + 1]!;
      // F0 needs 90–BF (no overlong form), F4 needs 80–8F (nothing past U+10FFFF).
      if ((b1 & 0xc0) !== 0x80 || (b === 0xf0 && b1 < 0x90) || (b === 0xf4 && b1 >= 0x90)) return false;
      if ((buf[i + 2]! & 0xc0) !== 0x80 || (buf[i + 3]! & 0xc0) !== 0x80) return false;
      i += 4;
      continue;
    }
    return false;
  }
  return true;
}
