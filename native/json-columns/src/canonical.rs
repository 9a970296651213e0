//! A `json` column's text: what `JSON.stringify(JSON.parse(value))` writes in the
//! TypeScript decoder (src/decode/exact-json.ts), produced from the bytes without the
//! intermediate objects. Forms whose printing depends on V8's number formatting or
//! object key ordering are rejected, so the TypeScript decoder writes those:
//!
//! - integer literals are kept as written (the exact reader keeps those of 16+ digits
//!   as BigInt and writes their digits; shorter ones are exact doubles that print the
//!   same), except `-0`, which prints as `0`;
//! - a literal with a fraction is taken when, without its trailing zeros, it has at most
//!   15 significant digits, at most 15 integer digits and at most 5 zeros after the
//!   point before its first digit (a double prints its shortest round-trip digits,
//!   which are these, in fixed notation from 1e-6 to 1e21); exponents are rejected;
//! - an object with a key that looks like an array index (JavaScript orders those
//!   first) or with a repeated key (JSON.parse keeps the last value at the first key's
//!   place) is rejected;
//! - strings are escaped as JSON.stringify escapes them; a lone surrogate is rejected.

use crate::reader::{Read, Reader, Reject, MAX_DEPTH};

pub fn write_canonical(
    reader: &mut Reader,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    depth: usize,
) -> Read<()> {
    if depth > MAX_DEPTH {
        return Err(Reject);
    }
    match reader.peek().ok_or(Reject)? {
        b'"' => {
            let mark = scratch.len();
            let text = match reader.string(scratch)? {
                Some(raw) => raw,
                None => &scratch[mark..],
            };
            write_string(out, text);
            scratch.truncate(mark);
            Ok(())
        }
        b'{' => {
            reader.expect(b'{')?;
            out.push(b'{');
            reader.skip_whitespace();
            if reader.peek() == Some(b'}') {
                reader.expect(b'}')?;
                out.push(b'}');
                return Ok(());
            }
            // Keys of this object as written to `out` (start, end), to find a repeated one.
            let mut keys: Vec<(usize, usize)> = Vec::new();
            loop {
                reader.skip_whitespace();
                let mark = scratch.len();
                let key = match reader.string(scratch)? {
                    Some(raw) => raw,
                    None => &scratch[mark..],
                };
                if !key.is_empty() && key.iter().all(u8::is_ascii_digit) {
                    return Err(Reject);
                }
                let start = out.len();
                write_string(out, key);
                let end = out.len();
                scratch.truncate(mark);
                if keys.iter().any(|&(s, e)| out[s..e] == out[start..end]) {
                    return Err(Reject);
                }
                keys.push((start, end));
                out.push(b':');
                reader.skip_whitespace();
                reader.expect(b':')?;
                reader.skip_whitespace();
                write_canonical(reader, out, scratch, depth + 1)?;
                reader.skip_whitespace();
                match reader.peek() {
                    Some(b',') => {
                        reader.expect(b',')?;
                        out.push(b',');
                    }
                    Some(b'}') => {
                        reader.expect(b'}')?;
                        out.push(b'}');
                        return Ok(());
                    }
                    _ => return Err(Reject),
                }
            }
        }
        b'[' => {
            reader.expect(b'[')?;
            out.push(b'[');
            reader.skip_whitespace();
            if reader.peek() == Some(b']') {
                reader.expect(b']')?;
                out.push(b']');
                return Ok(());
            }
            loop {
                reader.skip_whitespace();
                write_canonical(reader, out, scratch, depth + 1)?;
                reader.skip_whitespace();
                match reader.peek() {
                    Some(b',') => {
                        reader.expect(b',')?;
                        out.push(b',');
                    }
                    Some(b']') => {
                        reader.expect(b']')?;
                        out.push(b']');
                        return Ok(());
                    }
                    _ => return Err(Reject),
                }
            }
        }
        b't' => {
            reader.literal(b"true")?;
            out.extend_from_slice(b"true");
            Ok(())
        }
        b'f' => {
            reader.literal(b"false")?;
            out.extend_from_slice(b"false");
            Ok(())
        }
        b'n' => {
            reader.literal(b"null")?;
            out.extend_from_slice(b"null");
            Ok(())
        }
        _ => write_number(reader, out),
    }
}

fn write_number(reader: &mut Reader, out: &mut Vec<u8>) -> Read<()> {
    let n = reader.number()?;
    if n.has_exponent {
        return Err(Reject);
    }
    let fraction = trim_trailing_zeros(n.fraction);
    let zero_integer = n.integer == b"0";
    if n.fraction.is_empty() || fraction.is_empty() {
        if !n.fraction.is_empty() && n.integer.len() > 15 {
            return Err(Reject); // 1e21 and up print with an exponent; below, these digits
        }
        // -0 and -0.0 print as 0.
        if n.negative && !zero_integer {
            out.push(b'-');
        }
        out.extend_from_slice(n.integer);
        return Ok(());
    }
    if n.integer.len() > 15 {
        return Err(Reject);
    }
    let leading_zeros = if zero_integer {
        fraction.iter().take_while(|&&d| d == b'0').count()
    } else {
        0
    };
    if leading_zeros > 5 {
        return Err(Reject);
    }
    let significant = if zero_integer {
        fraction.len() - leading_zeros
    } else {
        n.integer.len() + fraction.len()
    };
    if significant > 15 {
        return Err(Reject);
    }
    if n.negative {
        out.push(b'-');
    }
    out.extend_from_slice(n.integer);
    out.push(b'.');
    out.extend_from_slice(fraction);
    Ok(())
}

fn trim_trailing_zeros(digits: &[u8]) -> &[u8] {
    let end = digits.iter().rposition(|&d| d != b'0').map_or(0, |i| i + 1);
    &digits[..end]
}

/// A string as JSON.stringify quotes it (the text is valid UTF-8 without lone surrogates).
pub fn write_string(out: &mut Vec<u8>, text: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let mut from = 0;
    for (i, &b) in text.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => &[],
            _ => continue,
        };
        out.extend_from_slice(&text[from..i]);
        if escape.is_empty() {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]);
        } else {
            out.extend_from_slice(escape);
        }
        from = i + 1;
    }
    out.extend_from_slice(&text[from..]);
    out.push(b'"');
}
