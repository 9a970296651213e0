//! Confluent-framed Protobuf messages into Arrow column buffers: the native twin of the
//! compiled reader of src/decode/protobuf/compiled-reader.ts (and field-values.ts), for the
//! message types whose every field it has here (src/decode/native-registry-columns.ts sends
//! them as a program).
//!
//! That reader stays the reference. This one takes exactly the messages it takes and writes
//! the same values: fields in any order, the last value of a field counting, unknown fields
//! skipped, an absent field null (with presence) or its type's default. A message it would
//! leave to protobufjs comes back as rejected, for the TypeScript decoder to decide.

use std::collections::HashMap;

use crate::columns::{Bits, Column, Out};
use crate::wire::{varint, zigzag, HEADER_BYTES};

/// protobufjs reads a tag as a uint32: a larger one names another field there.
const MAX_TAG: u64 = 0xffff_ffff;
/// Seconds whose microseconds are a safe integer (beyond, the reference reads them).
const MAX_SECONDS: u64 = 9_000_000_000;

const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LENGTH: u64 = 2;
const FIXED32: u64 = 5;

/// A field's type, with the reading the compiled reader gives it.
pub enum Kind {
    Int32,
    Sint32,
    Uint32,
    Int64,
    Sint64,
    Uint64,
    Bool,
    Double,
    Float,
    Fixed32,
    Sfixed32,
    Fixed64,
    Sfixed64,
    String,
    Bytes,
    /// google.protobuf.Timestamp, as microseconds.
    Timestamp,
    /// google.protobuf.Duration, as microseconds.
    Duration,
    /// The names of the enum's numbers.
    Enum(HashMap<i32, Vec<u8>>),
    Message(Message),
}

/// What a message without the field holds there.
pub enum Absent {
    Null,
    /// A zero of the column's width.
    Zero,
    False,
    Empty,
    /// The enum's default, named.
    Name(Vec<u8>),
}

pub struct FieldSpec {
    kind: Kind,
    absent: Absent,
}

/// Field numbers below this are looked up in a table, as the compiled reader does.
const SMALL_NUMBERS: u64 = 1024;
/// Messages of at most this many fields note where each field's last value starts on the stack.
const STACK_FIELDS: usize = 32;

/// A message type's fields, in column order, and where each field number goes.
pub struct Message {
    fields: Vec<FieldSpec>,
    /// By field number below SMALL_NUMBERS: the field's index, or usize::MAX.
    small: Vec<usize>,
    /// The others (numbers up to 2^29 - 1).
    large: HashMap<u64, usize>,
}

/// The codes of the program (src/decode/protobuf/native-ops.ts writes them).
fn kind_of(code: f64) -> Option<Kind> {
    Some(match code as u32 {
        0 => Kind::Int32,
        1 => Kind::Sint32,
        2 => Kind::Uint32,
        3 => Kind::Int64,
        4 => Kind::Sint64,
        5 => Kind::Uint64,
        6 => Kind::Bool,
        7 => Kind::Double,
        8 => Kind::Float,
        9 => Kind::Fixed32,
        10 => Kind::Sfixed32,
        11 => Kind::Fixed64,
        12 => Kind::Sfixed64,
        13 => Kind::String,
        14 => Kind::Bytes,
        15 => Kind::Timestamp,
        16 => Kind::Duration,
        _ => return None,
    })
}
const ENUM: u32 = 17;
const MESSAGE: u32 = 18;

/// Reads a message from `program[*at..]`: its field count, then per field its number, its
/// absent code (4, a name: then the name's index into `symbols`) and its kind code (an enum:
/// then its count of (number, name index) pairs; a message: then its own program).
pub fn parse(program: &[f64], at: &mut usize, symbols: &[String]) -> Result<Message, String> {
    fn next(program: &[f64], at: &mut usize) -> Result<f64, String> {
        let v = *program.get(*at).ok_or("the program ends inside a message")?;
        *at += 1;
        Ok(v)
    }
    let symbol = |i: f64| -> Result<Vec<u8>, String> {
        symbols
            .get(i as usize)
            .map(|s| s.as_bytes().to_vec())
            .ok_or_else(|| "a name lies outside the symbols".to_string())
    };
    let count = next(program, at)? as usize;
    let mut fields = Vec::with_capacity(count);
    let mut index = HashMap::with_capacity(count);
    for i in 0..count {
        let number = next(program, at)? as u64;
        let absent = match next(program, at)? as u32 {
            0 => Absent::Null,
            1 => Absent::Zero,
            2 => Absent::False,
            3 => Absent::Empty,
            4 => Absent::Name(symbol(next(program, at)?)?),
            other => return Err(format!("unknown absent code {other}")),
        };
        let code = next(program, at)?;
        let kind = match code as u32 {
            ENUM => {
                let n = next(program, at)? as usize;
                let mut names = HashMap::with_capacity(n);
                for _ in 0..n {
                    let id = next(program, at)? as i32;
                    names.insert(id, symbol(next(program, at)?)?);
                }
                Kind::Enum(names)
            }
            MESSAGE => Kind::Message(parse(program, at, symbols)?),
            _ => kind_of(code).ok_or_else(|| format!("unknown kind code {code}"))?,
        };
        if index.insert(number, i).is_some() {
            return Err(format!("field number {number} twice"));
        }
        fields.push(FieldSpec { kind, absent });
    }
    let mut small = vec![usize::MAX; SMALL_NUMBERS as usize];
    index.retain(|&number, &mut i| {
        if number < SMALL_NUMBERS {
            small[number as usize] = i;
        }
        number >= SMALL_NUMBERS
    });
    Ok(Message {
        fields,
        small,
        large: index,
    })
}

/// A length-delimited value within `end`: where its bytes start and end.
#[inline]
fn length_prefixed(buf: &[u8], pos: usize, end: usize) -> Option<(usize, usize)> {
    let (n, start) = varint(buf, pos, end, 5)?;
    let stop = start.checked_add(usize::try_from(n).ok()?)?;
    (stop <= end).then_some((start, stop))
}

/// The position after an unknown field's value of wire type `wire` (no groups).
fn skip(buf: &[u8], mut pos: usize, end: usize, wire: u64) -> Option<usize> {
    match wire {
        VARINT => {
            for _ in 0..10 {
                if pos >= end {
                    return None;
                }
                pos += 1;
                if buf[pos - 1] & 0x80 == 0 {
                    return Some(pos);
                }
            }
            None
        }
        FIXED64 => (pos + 8 <= end).then_some(pos + 8),
        LENGTH => length_prefixed(buf, pos, end).map(|(_, stop)| stop),
        FIXED32 => (pos + 4 <= end).then_some(pos + 4),
        _ => None,
    }
}

/// protobufjs's int32 of a varint of up to 35 bits: its low 32 bits.
#[inline]
fn int32_of(raw: u64) -> i32 {
    raw as u32 as i32
}

#[inline]
fn sint32_of(raw: u64) -> i32 {
    let low = raw as u32;
    ((low >> 1) as i32) ^ -((low & 1) as i32)
}

/// The microseconds of a Timestamp or Duration message at [start, end), when its nanos are
/// whole microseconds and its seconds within MAX_SECONDS (field-values.ts's `micros`).
fn micros(buf: &[u8], start: usize, end: usize) -> Option<i64> {
    let mut seconds: u64 = 0;
    let mut nanos: i32 = 0;
    let mut pos = start;
    while pos < end {
        let (tag, after) = varint(buf, pos, end, 5)?;
        if tag > MAX_TAG {
            return None;
        }
        pos = after;
        let (wire, number) = (tag & 7, tag >> 3);
        if number == 1 || number == 2 {
            if wire != VARINT {
                return None;
            }
            let (n, after) = varint(buf, pos, end, if number == 1 { 8 } else { 5 })?;
            if number == 1 {
                seconds = n;
            } else {
                nanos = int32_of(n);
            }
            pos = after;
        } else {
            pos = skip(buf, pos, end, wire)?;
        }
    }
    if nanos % 1000 != 0 || seconds > MAX_SECONDS {
        return None;
    }
    Some(seconds as i64 * 1_000_000 + i64::from(nanos / 1000))
}

impl Kind {
    fn wire(&self) -> u64 {
        match self {
            Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => FIXED64,
            Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => FIXED32,
            Kind::String | Kind::Bytes | Kind::Timestamp | Kind::Duration | Kind::Message(_) => LENGTH,
            _ => VARINT,
        }
    }

    /// The varint's byte limit of a varint kind.
    fn max_bytes(&self) -> usize {
        match self {
            Kind::Int64 | Kind::Sint64 | Kind::Uint64 => 8,
            Kind::Bool => 1,
            _ => 5,
        }
    }

    /// The position after the value at `pos` (just after its tag), or None.
    fn check(&self, buf: &[u8], pos: usize, end: usize) -> Option<usize> {
        let fixed = |size: usize| (pos + size <= end).then_some(pos + size);
        match self {
            Kind::Double => {
                let bytes: [u8; 8] = buf.get(pos..fixed(8)?)?.try_into().ok()?;
                f64::from_le_bytes(bytes).is_finite().then_some(pos + 8)
            }
            Kind::Float => {
                let bytes: [u8; 4] = buf.get(pos..fixed(4)?)?.try_into().ok()?;
                f32::from_le_bytes(bytes).is_finite().then_some(pos + 4)
            }
            Kind::Fixed32 | Kind::Sfixed32 => fixed(4),
            Kind::Fixed64 | Kind::Sfixed64 => fixed(8),
            Kind::String => {
                let (start, stop) = length_prefixed(buf, pos, end)?;
                std::str::from_utf8(&buf[start..stop]).is_ok().then_some(stop)
            }
            Kind::Bytes => length_prefixed(buf, pos, end).map(|(_, stop)| stop),
            Kind::Timestamp | Kind::Duration => {
                let (start, stop) = length_prefixed(buf, pos, end)?;
                micros(buf, start, stop).map(|_| stop)
            }
            Kind::Message(message) => {
                let (start, stop) = length_prefixed(buf, pos, end)?;
                message.check(buf, start, stop).then_some(stop)
            }
            Kind::Enum(names) => {
                let (raw, after) = varint(buf, pos, end, 5)?;
                names.contains_key(&int32_of(raw)).then_some(after)
            }
            _ => varint(buf, pos, end, self.max_bytes()).map(|(_, after)| after),
        }
    }

    /// Appends the (checked) value at `pos`.
    fn append(&self, buf: &[u8], pos: usize, out: &mut Out) {
        if let (Kind::Message(message), Out::Struct { validity, children }) = (self, &mut *out) {
            let (start, stop) = length_prefixed(buf, pos, buf.len()).expect("checked");
            message.append(buf, start, stop, children);
            validity.push(true);
            return;
        }
        let Out::Leaf { column, .. } = out else {
            unreachable!("a field's column is made from it")
        };
        let raw = || varint(buf, pos, buf.len(), self.max_bytes()).expect("checked").0;
        match self {
            Kind::Int32 => column.push_fixed(&int32_of(raw()).to_le_bytes()),
            Kind::Sint32 => column.push_fixed(&sint32_of(raw()).to_le_bytes()),
            Kind::Uint32 => column.push_fixed(&(raw() as u32).to_le_bytes()),
            Kind::Int64 => column.push_fixed(&(raw() as i64).to_le_bytes()),
            Kind::Sint64 => column.push_fixed(&zigzag(raw()).to_le_bytes()),
            Kind::Uint64 => column.push_fixed(&raw().to_le_bytes()),
            Kind::Bool => column.push_bool(raw() != 0),
            Kind::Enum(names) => column.push_bytes(&names[&int32_of(raw())]),
            Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => column.push_fixed(&buf[pos..pos + 4]),
            Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => column.push_fixed(&buf[pos..pos + 8]),
            Kind::String | Kind::Bytes => {
                let (start, stop) = length_prefixed(buf, pos, buf.len()).expect("checked");
                column.push_bytes(&buf[start..stop]);
            }
            Kind::Timestamp | Kind::Duration => {
                let (start, stop) = length_prefixed(buf, pos, buf.len()).expect("checked");
                column.push_fixed(&micros(buf, start, stop).expect("checked").to_le_bytes());
            }
            Kind::Message(_) => unreachable!("a message's column is a struct"),
        }
    }

    fn out(&self) -> Out {
        let leaf = |column: Column, width: usize| Out::Leaf { column, width };
        match self {
            Kind::Int32 | Kind::Sint32 | Kind::Uint32 | Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => {
                leaf(Column::fixed(), 4)
            }
            Kind::Bool => leaf(Column::boolean(), 0),
            Kind::String | Kind::Bytes | Kind::Enum(_) => leaf(Column::utf8(), 0),
            Kind::Message(message) => Out::Struct {
                validity: Bits::default(),
                children: message.outs(),
            },
            _ => leaf(Column::fixed(), 8),
        }
    }
}

impl Absent {
    fn append(&self, out: &mut Out) {
        match (self, out) {
            (Absent::Null, out) => out.push_null(),
            (Absent::Zero, Out::Leaf { column, width }) => column.push_fixed(&[0u8; 8][..*width]),
            (Absent::False, Out::Leaf { column, .. }) => column.push_bool(false),
            (Absent::Empty, Out::Leaf { column, .. }) => column.push_bytes(b""),
            (Absent::Name(name), Out::Leaf { column, .. }) => column.push_bytes(name),
            _ => unreachable!("a struct's absent value is null"),
        }
    }
}

impl Message {
    /// The index of the field numbered `number`, if the type has it.
    #[inline]
    fn field_of(&self, number: u64) -> Option<usize> {
        if number < SMALL_NUMBERS {
            Some(self.small[number as usize]).filter(|&i| i != usize::MAX)
        } else {
            self.large.get(&number).copied()
        }
    }

    /// One column per field, in field order.
    pub fn outs(&self) -> Vec<Out> {
        self.fields.iter().map(|f| f.kind.out()).collect()
    }

    /// Whether every field of the message at [start, end) is read exactly.
    fn check(&self, buf: &[u8], start: usize, end: usize) -> bool {
        let mut pos = start;
        while pos < end {
            let Some((tag, after)) = varint(buf, pos, end, 5) else {
                return false;
            };
            // Field number 0 is no field, and protobufjs keeps a tag's low 32 bits only.
            if !(8..=MAX_TAG).contains(&tag) {
                return false;
            }
            let wire = tag & 7;
            let next = match self.field_of(tag >> 3) {
                None => skip(buf, after, end, wire),
                Some(i) => {
                    let kind = &self.fields[i].kind;
                    if kind.wire() == wire {
                        kind.check(buf, after, end)
                    } else {
                        None
                    }
                }
            };
            match next {
                Some(p) => pos = p,
                None => return false,
            }
        }
        true
    }

    /// Appends the (checked) message at [start, end): each field's last value, in column order.
    fn append(&self, buf: &[u8], start: usize, end: usize, outs: &mut [Out]) {
        let n = self.fields.len();
        let mut on_stack = [usize::MAX; STACK_FIELDS];
        let mut on_heap;
        let at: &mut [usize] = if n <= STACK_FIELDS {
            &mut on_stack[..n]
        } else {
            on_heap = vec![usize::MAX; n];
            &mut on_heap
        };
        let mut pos = start;
        while pos < end {
            let (tag, after) = varint(buf, pos, end, 5).expect("checked");
            if let Some(i) = self.field_of(tag >> 3) {
                at[i] = after;
            }
            pos = skip(buf, after, end, tag & 7).expect("checked");
        }
        for ((field, out), &p) in self.fields.iter().zip(outs.iter_mut()).zip(at.iter()) {
            if p == usize::MAX {
                field.absent.append(out);
            } else {
                field.kind.append(buf, p, out);
            }
        }
    }
}

/// A message type framed with the message-index list `prefix` (its exact bytes, as
/// serializers write them): checks a framed value whole, then appends it.
pub struct Framed<'a> {
    pub message: &'a Message,
    pub prefix: &'a [u8],
}

impl Framed<'_> {
    fn body(&self, record: &[u8]) -> Option<usize> {
        let at = HEADER_BYTES + self.prefix.len();
        (record.len() >= at && record[0] == 0 && &record[HEADER_BYTES..at] == self.prefix).then_some(at)
    }

    pub fn check(&self, record: &[u8]) -> bool {
        self.body(record)
            .is_some_and(|at| self.message.check(record, at, record.len()))
    }

    pub fn append(&self, record: &[u8], outs: &mut [Out]) {
        let at = self.body(record).expect("checked");
        self.message.append(record, at, record.len(), outs);
    }
}
