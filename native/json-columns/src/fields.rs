//! One record's declared fields: read from its JSON object, checked whole, then appended.

use crate::canonical::write_canonical;
use crate::columns::Column;
use crate::reader::{NumberToken, Read, Reader, Reject};

/// The column types this decoder writes; the codes match src/decode/native-json-columns.ts.
#[derive(Clone, Copy, PartialEq)]
pub enum Kind {
    String = 0,
    Int32 = 1,
    Int64 = 2,
    Float64 = 3,
    Boolean = 4,
    Timestamp = 5,
    Json = 6,
    /// A float32 vector of the field's `dim`: base64 of its little-endian bytes or a JSON
    /// array of numbers, written as `dim` f32 per row (a FixedSizeList's child buffer).
    VectorF32 = 7,
}

impl Kind {
    pub fn from_code(code: u32) -> Option<Kind> {
        Some(match code {
            0 => Kind::String,
            1 => Kind::Int32,
            2 => Kind::Int64,
            3 => Kind::Float64,
            4 => Kind::Boolean,
            5 => Kind::Timestamp,
            6 => Kind::Json,
            7 => Kind::VectorF32,
            _ => return None,
        })
    }

    fn width(self) -> usize {
        match self {
            Kind::Int32 => 4,
            Kind::Int64 | Kind::Float64 | Kind::Timestamp => 8,
            Kind::String | Kind::Boolean | Kind::Json | Kind::VectorF32 => 0,
        }
    }

    pub fn column(self) -> Column {
        match self {
            Kind::String | Kind::Json => Column::utf8(),
            Kind::Boolean => Column::boolean(),
            _ => Column::fixed(),
        }
    }
}

/// Numeric timestamps: epoch values in this unit (codes as in native-json-columns.ts).
#[derive(Clone, Copy)]
pub enum EpochUnit {
    Seconds = 0,
    Millis = 1,
    Micros = 2,
    Nanos = 3,
}

impl EpochUnit {
    pub fn from_code(code: u32) -> Option<EpochUnit> {
        Some(match code {
            0 => EpochUnit::Seconds,
            1 => EpochUnit::Millis,
            2 => EpochUnit::Micros,
            3 => EpochUnit::Nanos,
            _ => return None,
        })
    }
}

pub struct Field {
    pub name: Vec<u8>,
    pub kind: Kind,
    pub nullable: bool,
    pub unit: EpochUnit,
    /// Vectors: the elements per row.
    pub dim: usize,
}

impl Field {
    /// The bytes of one fixed-width value (a null row's zeros).
    pub fn width(&self) -> usize {
        match self.kind {
            Kind::VectorF32 => self.dim * 4,
            kind => kind.width(),
        }
    }
}

/// A field's value in the record being read, before the record is known to be whole.
#[derive(Clone, Copy)]
pub enum Pending {
    Absent,
    Null,
    /// Bytes of the record (`in_scratch` false) or of the scratch buffer.
    Text {
        start: usize,
        end: usize,
        in_scratch: bool,
    },
    Int(i64),
    Float(f64),
    Bool(bool),
}

/// 0000-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z (src/decode/timestamp.ts).
const MIN_TIMESTAMP_MS: i64 = -62_167_219_200_000;
const MAX_TIMESTAMP_MS: i64 = 253_402_300_799_999;

/// Reads one record's object into `pending` (one slot per field), or rejects it.
pub fn read_record(
    fields: &[Field],
    bytes: &[u8],
    pending: &mut [Pending],
    scratch: &mut Vec<u8>,
) -> Read<()> {
    for p in pending.iter_mut() {
        *p = Pending::Absent;
    }
    scratch.clear();
    let mut reader = Reader::new(bytes);
    reader.skip_whitespace();
    reader.expect(b'{')?;
    reader.skip_whitespace();
    if reader.peek() == Some(b'}') {
        reader.expect(b'}')?;
    } else {
        loop {
            reader.skip_whitespace();
            let mark = scratch.len();
            let key = match reader.string(scratch)? {
                Some(raw) => raw,
                None => &scratch[mark..],
            };
            let index = fields.iter().position(|f| f.name == key);
            scratch.truncate(mark);
            reader.skip_whitespace();
            reader.expect(b':')?;
            reader.skip_whitespace();
            match index {
                Some(i) => {
                    // JSON.parse keeps a repeated key's last value: rare enough to leave to it.
                    if !matches!(pending[i], Pending::Absent) {
                        return Err(Reject);
                    }
                    pending[i] = read_value(&fields[i], &mut reader, bytes, scratch)?;
                }
                None => reader.skip_value(scratch, 1)?,
            }
            reader.skip_whitespace();
            match reader.peek() {
                Some(b',') => reader.expect(b',')?,
                Some(b'}') => {
                    reader.expect(b'}')?;
                    break;
                }
                _ => return Err(Reject),
            }
        }
    }
    reader.skip_whitespace();
    if !reader.at_end() {
        return Err(Reject);
    }
    Ok(())
}

fn read_value(field: &Field, reader: &mut Reader, record: &[u8], scratch: &mut Vec<u8>) -> Read<Pending> {
    if reader.peek() == Some(b'n') {
        reader.literal(b"null")?;
        return Ok(Pending::Null);
    }
    match field.kind {
        Kind::String => text(reader, record, scratch),
        Kind::Json => {
            let start = scratch.len();
            // The object's own keys are checked and written in the same scratch; the text
            // begins after whatever they left behind.
            let mut keys = Vec::new();
            write_canonical(reader, scratch, &mut keys, 1)?;
            Ok(Pending::Text {
                start,
                end: scratch.len(),
                in_scratch: true,
            })
        }
        Kind::Boolean => match reader.peek() {
            Some(b't') => reader.literal(b"true").map(|_| Pending::Bool(true)),
            Some(b'f') => reader.literal(b"false").map(|_| Pending::Bool(false)),
            _ => Err(Reject),
        },
        Kind::Int32 => {
            let n = integer(&reader.number()?, 10)?;
            if n < i32::MIN as i64 || n > i32::MAX as i64 {
                return Err(Reject);
            }
            Ok(Pending::Int(n))
        }
        Kind::Int64 => {
            if reader.peek() == Some(b'"') {
                // A string of 1-20 digits, as the TypeScript codec takes it.
                let Pending::Text {
                    start,
                    end,
                    in_scratch,
                } = text(reader, record, scratch)?
                else {
                    return Err(Reject);
                };
                let digits = if in_scratch {
                    &scratch[start..end]
                } else {
                    &record[start..end]
                };
                let body = digits.strip_prefix(b"-").unwrap_or(digits);
                if body.is_empty() || body.len() > 20 || !body.iter().all(u8::is_ascii_digit) {
                    return Err(Reject);
                }
                let n = parse_decimal(digits).ok_or(Reject)?;
                return i64::try_from(n).map(Pending::Int).map_err(|_| Reject);
            }
            Ok(Pending::Int(integer(&reader.number()?, 19)?))
        }
        Kind::Float64 => {
            let n = reader.number()?;
            // An integer literal of 16+ digits: the TypeScript codec keeps it only when the
            // double is exact or prints as it; left to it.
            if n.fraction.is_empty() && !n.has_exponent && n.integer.len() > 15 {
                return Err(Reject);
            }
            let text = std::str::from_utf8(n.text).map_err(|_| Reject)?;
            text.parse::<f64>().map(Pending::Float).map_err(|_| Reject)
        }
        Kind::Timestamp => match reader.peek() {
            Some(b'"') => {
                let Pending::Text {
                    start,
                    end,
                    in_scratch,
                } = text(reader, record, scratch)?
                else {
                    return Err(Reject);
                };
                let value = if in_scratch {
                    &scratch[start..end]
                } else {
                    &record[start..end]
                };
                canonical_utc_ms(value).map(Pending::Int).ok_or(Reject)
            }
            _ => epoch_ms(&reader.number()?, field.unit).map(Pending::Int),
        },
        Kind::VectorF32 => {
            let start = scratch.len();
            if reader.peek() == Some(b'"') {
                let Pending::Text {
                    start: text_start,
                    end,
                    in_scratch,
                } = text(reader, record, scratch)?
                else {
                    return Err(Reject);
                };
                if in_scratch {
                    // An escaped string was unescaped into the scratch: decode a copy of it.
                    let encoded = scratch.drain(text_start..end).collect::<Vec<u8>>();
                    scratch.truncate(start);
                    vector_from_base64(&encoded, field.dim, scratch)?;
                } else {
                    vector_from_base64(&record[text_start..end], field.dim, scratch)?;
                }
            } else {
                vector_from_numbers(reader, field.dim, scratch)?;
            }
            Ok(Pending::Text {
                start,
                end: scratch.len(),
                in_scratch: true,
            })
        }
    }
}

/// Base64 as src/decode/base64.ts takes it (standard alphabet, `=` only as the last one or
/// two of a length that is a multiple of 4; leftover bits ignored, as Buffer.from does) of
/// exactly `dim` little-endian f32, none NaN or infinite, appended to `out`.
fn vector_from_base64(text: &[u8], dim: usize, out: &mut Vec<u8>) -> Read<()> {
    if !text.len().is_multiple_of(4) {
        return Err(Reject);
    }
    let padding = text.iter().rev().take_while(|&&c| c == b'=').count();
    if padding > 2 || text.len() / 4 * 3 - padding != dim * 4 {
        return Err(Reject);
    }
    let start = out.len();
    out.resize(start + dim * 4, 0);
    let bytes = &mut out[start..];
    let body = &text[..text.len() - padding];
    let groups = body.chunks_exact(4);
    let rest = groups.remainder();
    // Four characters to three bytes; a character outside the alphabet sets a high bit.
    for (group, to) in groups.zip(bytes.chunks_exact_mut(3)) {
        let [a, b, c, d] = [0, 1, 2, 3].map(|i| SEXTETS[group[i] as usize] as u32);
        if (a | b | c | d) & 0xc0 != 0 {
            return Err(Reject);
        }
        let bits = (a << 18) | (b << 12) | (c << 6) | d;
        to.copy_from_slice(&bits.to_be_bytes()[1..]);
    }
    if !rest.is_empty() {
        let mut bits = 0u32;
        for &c in rest {
            let v = SEXTETS[c as usize] as u32;
            if v & 0xc0 != 0 {
                return Err(Reject);
            }
            bits = (bits << 6) | v;
        }
        let tail = bytes.len() - (rest.len() - 1);
        match rest.len() {
            3 => bytes[tail..].copy_from_slice(&(bits >> 2).to_be_bytes()[2..]),
            2 => bytes[tail] = (bits >> 4) as u8,
            _ => return Err(Reject),
        }
    }
    // NaN and infinities have every exponent bit set (bits 23-30 of the little-endian f32).
    if bytes
        .chunks_exact(4)
        .any(|b| b[3] & 0x7f == 0x7f && b[2] & 0x80 == 0x80)
    {
        return Err(Reject);
    }
    Ok(())
}

/// The standard base64 alphabet's values; 0xff for every other byte.
const SEXTETS: [u8; 256] = {
    let mut table = [0xffu8; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        table[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// A JSON array of exactly `dim` numbers, each read as JSON.parse reads it (the nearest
/// double) and rounded to f32 as Math.fround does (nearest, ties to even), none infinite
/// before or after; appended to `out` little-endian.
fn vector_from_numbers(reader: &mut Reader, dim: usize, out: &mut Vec<u8>) -> Read<()> {
    reader.expect(b'[')?;
    out.reserve(dim * 4);
    let mut count = 0usize;
    reader.skip_whitespace();
    if reader.peek() == Some(b']') {
        return Err(Reject);
    }
    loop {
        reader.skip_whitespace();
        let n = reader.number()?;
        // An integer literal of 16+ digits may be beyond 2^53, which the TypeScript decoder
        // reads exactly (as a BigInt) and refuses in a vector: left to it.
        if n.fraction.is_empty() && !n.has_exponent && n.integer.len() > 15 {
            return Err(Reject);
        }
        let text = std::str::from_utf8(n.text).map_err(|_| Reject)?;
        let x = text.parse::<f64>().map_err(|_| Reject)?;
        let f = x as f32;
        if !x.is_finite() || !f.is_finite() || count == dim {
            return Err(Reject);
        }
        out.extend_from_slice(&f.to_le_bytes());
        count += 1;
        reader.skip_whitespace();
        match reader.peek() {
            Some(b',') => reader.expect(b',')?,
            Some(b']') => {
                reader.expect(b']')?;
                break;
            }
            _ => return Err(Reject),
        }
    }
    if count != dim {
        return Err(Reject);
    }
    Ok(())
}

fn text(reader: &mut Reader, record: &[u8], scratch: &mut Vec<u8>) -> Read<Pending> {
    if reader.peek() != Some(b'"') {
        return Err(Reject);
    }
    let mark = scratch.len();
    Ok(match reader.string(scratch)? {
        Some(raw) => {
            let start = raw.as_ptr() as usize - record.as_ptr() as usize;
            Pending::Text {
                start,
                end: start + raw.len(),
                in_scratch: false,
            }
        }
        None => Pending::Text {
            start: mark,
            end: scratch.len(),
            in_scratch: true,
        },
    })
}

/// An integer value: no exponent, a fraction only of zeros (then at most 15 digits, the
/// exact doubles), at most `max_digits` digits.
fn integer(n: &NumberToken, max_digits: usize) -> Read<i64> {
    if n.has_exponent || n.integer.len() > max_digits {
        return Err(Reject);
    }
    if !n.fraction.is_empty() && (n.integer.len() > 15 || n.fraction.iter().any(|&d| d != b'0')) {
        return Err(Reject);
    }
    let magnitude = parse_decimal(n.integer).ok_or(Reject)?;
    i64::try_from(if n.negative { -magnitude } else { magnitude }).map_err(|_| Reject)
}

fn parse_decimal(text: &[u8]) -> Option<i128> {
    let (negative, digits) = match text.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if digits.is_empty() || digits.len() > 30 {
        return None;
    }
    let mut value: i128 = 0;
    for &d in digits {
        value = value * 10 + (d - b'0') as i128;
    }
    Some(if negative { -value } else { value })
}

/// An epoch number in `unit`, floored to the millisecond, through its decimal digits.
fn epoch_ms(n: &NumberToken, unit: EpochUnit) -> Read<i64> {
    if n.has_exponent {
        return Err(Reject);
    }
    let fraction = {
        let end = n.fraction.iter().rposition(|&d| d != b'0').map_or(0, |i| i + 1);
        &n.fraction[..end]
    };
    // Fractions: the double's digits are the literal's only up to 15 significant digits.
    if !fraction.is_empty() && n.integer.len() + fraction.len() > 15 {
        return Err(Reject);
    }
    if fraction.is_empty() && n.integer.len() > 19 {
        return Err(Reject);
    }
    let mut scaled: i128 = 0;
    for &d in n.integer.iter().chain(fraction) {
        scaled = scaled * 10 + (d - b'0') as i128;
    }
    if n.negative {
        scaled = -scaled;
    }
    let scale = 10i128.pow(fraction.len() as u32);
    let (multiply, divide) = match unit {
        EpochUnit::Seconds => (1000, 1),
        EpochUnit::Millis => (1, 1),
        EpochUnit::Micros => (1, 1000),
        EpochUnit::Nanos => (1, 1_000_000),
    };
    let ms = (scaled * multiply).div_euclid(scale * divide);
    if ms < MIN_TIMESTAMP_MS as i128 || ms > MAX_TIMESTAMP_MS as i128 {
        return Err(Reject);
    }
    Ok(ms as i64)
}

/// `YYYY-MM-DD(T|t| )hh:mm:ss.sss(Z|z)`, the form timestamp.ts reads from character codes.
fn canonical_utc_ms(text: &[u8]) -> Option<i64> {
    if text.len() != 24
        || text[4] != b'-'
        || text[7] != b'-'
        || !matches!(text[10], b'T' | b't' | b' ')
        || text[13] != b':'
        || text[16] != b':'
        || text[19] != b'.'
        || !matches!(text[23], b'Z' | b'z')
    {
        return None;
    }
    let digits = |start: usize, length: usize| -> Option<i64> {
        let mut value = 0i64;
        for &d in &text[start..start + length] {
            if !d.is_ascii_digit() {
                return None;
            }
            value = value * 10 + (d - b'0') as i64;
        }
        Some(value)
    };
    let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (hour, minute, second, millis) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?, digits(20, 3)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    Some(
        days_from_civil(year, month, day) * 86_400_000 + ((hour * 60 + minute) * 60 + second) * 1000 + millis,
    )
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Appends a read record to the columns, or rejects it (a required field is null or
/// absent; the event-time field has no time) without appending anything.
pub fn append_record(
    fields: &[Field],
    pending: &[Pending],
    record: &[u8],
    scratch: &[u8],
    event_time: Option<usize>,
    columns: &mut [Column],
) -> Read<()> {
    for (field, value) in fields.iter().zip(pending) {
        if !field.nullable && matches!(value, Pending::Absent | Pending::Null) {
            return Err(Reject);
        }
    }
    if let Some(e) = event_time {
        if !matches!(pending[e], Pending::Int(_)) {
            return Err(Reject);
        }
    }
    for ((field, value), column) in fields.iter().zip(pending).zip(columns.iter_mut()) {
        match *value {
            Pending::Absent | Pending::Null => column.push_null(field.width()),
            Pending::Text {
                start,
                end,
                in_scratch,
            } => {
                let bytes = if in_scratch {
                    &scratch[start..end]
                } else {
                    &record[start..end]
                };
                if field.kind == Kind::VectorF32 {
                    column.push_fixed(bytes);
                } else {
                    column.push_bytes(bytes);
                }
            }
            Pending::Int(n) => match field.kind {
                Kind::Int32 => column.push_fixed(&(n as i32).to_le_bytes()),
                _ => column.push_fixed(&n.to_le_bytes()),
            },
            Pending::Float(x) => column.push_fixed(&x.to_le_bytes()),
            Pending::Bool(b) => column.push_bool(b),
        }
    }
    Ok(())
}
