//! Confluent-framed Avro datums into Arrow column buffers: the native twin of the compiled
//! reader of src/decode/avro/compiled-reader.ts, for the writer schemas whose every node it
//! has here (src/decode/native-registry-columns.ts sends them as a program).
//!
//! That reader stays the reference. This one takes exactly the records it takes and writes
//! the same values; a record it would leave to avsc comes back as rejected, in order, for
//! the TypeScript decoder to decide. Each record is walked twice, as there: `check` without
//! writing, then `append`, so a record refused halfway leaves no partial row.

use crate::columns::{Bits, Column, Out};
use crate::wire::{self, zigzag, HEADER_BYTES};

/// The zig-zag varint avsc's readLong reads, where that is exact: at most 8 bytes, below
/// 2^53 before zig-zag (the compiled reader's `varint`). Returns it and the position after.
#[inline]
fn varint(buf: &[u8], pos: usize) -> Option<(i64, usize)> {
    wire::varint(buf, pos, buf.len(), 8).map(|(raw, after)| (zigzag(raw), after))
}

/// One node of a writer schema, with the reading the compiled reader gives it.
pub enum Node {
    /// One byte: 0 is false, anything else true.
    Bool,
    /// An int (or date): an exact varint within [min, max], into Int32.
    Int { min: f64, max: f64 },
    /// A long (or timestamp): an exact varint within [min, max], into Int64; with `big`
    /// (a long of every int64) also a 9- or 10-byte varint, of any value.
    Long { big: bool, min: f64, max: f64 },
    /// Four bytes, finite.
    Float32,
    /// Eight bytes, as they are.
    Float64,
    /// A length, then the bytes (well-formed UTF-8 with `utf8`).
    Bytes { utf8: bool },
    /// An index into the symbols, whose UTF-8 is the value.
    Enum { symbols: Vec<Vec<u8>> },
    /// `size` bytes.
    Fixed { size: usize },
    /// A union of null and one type: `null_index` -1 when no branch is null.
    Optional {
        null_index: i64,
        value_index: i64,
        inner: Box<Node>,
    },
    /// A record: a Struct of its fields.
    Record { children: Vec<Node> },
}

/// The codes of the program (src/decode/avro/native-ops.ts writes them).
mod op {
    pub const BOOL: f64 = 0.0;
    pub const INT: f64 = 1.0;
    pub const LONG: f64 = 2.0;
    pub const FLOAT32: f64 = 3.0;
    pub const FLOAT64: f64 = 4.0;
    pub const STRING: f64 = 5.0;
    pub const BYTES: f64 = 6.0;
    pub const ENUM: f64 = 7.0;
    pub const FIXED: f64 = 8.0;
    pub const OPTIONAL: f64 = 9.0;
    pub const RECORD: f64 = 10.0;
}

/// Reads a node from `program[*at..]` (preorder; an enum's symbols are `symbols[first..first + count]`).
pub fn parse(program: &[f64], at: &mut usize, symbols: &[String]) -> Result<Node, String> {
    let mut next = || -> Result<f64, String> {
        let v = *program.get(*at).ok_or("the program ends inside a node")?;
        *at += 1;
        Ok(v)
    };
    let code = next()?;
    Ok(match code {
        c if c == op::BOOL => Node::Bool,
        c if c == op::INT => Node::Int {
            min: next()?,
            max: next()?,
        },
        c if c == op::LONG => Node::Long {
            big: next()? != 0.0,
            min: next()?,
            max: next()?,
        },
        c if c == op::FLOAT32 => Node::Float32,
        c if c == op::FLOAT64 => Node::Float64,
        c if c == op::STRING => Node::Bytes { utf8: true },
        c if c == op::BYTES => Node::Bytes { utf8: false },
        c if c == op::ENUM => {
            let first = next()? as usize;
            let count = next()? as usize;
            let chosen = symbols
                .get(first..first + count)
                .ok_or("an enum's symbols lie outside the list")?;
            Node::Enum {
                symbols: chosen.iter().map(|s| s.as_bytes().to_vec()).collect(),
            }
        }
        c if c == op::FIXED => Node::Fixed {
            size: next()? as usize,
        },
        c if c == op::OPTIONAL => {
            let null_index = next()? as i64;
            let value_index = next()? as i64;
            let inner = Box::new(parse(program, at, symbols)?);
            Node::Optional {
                null_index,
                value_index,
                inner,
            }
        }
        c if c == op::RECORD => {
            let n = next()? as usize;
            let mut children = Vec::with_capacity(n);
            for _ in 0..n {
                children.push(parse(program, at, symbols)?);
            }
            Node::Record { children }
        }
        other => return Err(format!("unknown op {other}")),
    })
}

/// The column a node writes.
pub fn out_of(node: &Node) -> Out {
    let leaf = |column: Column, width: usize| Out::Leaf { column, width };
    match node {
        Node::Bool => leaf(Column::boolean(), 0),
        Node::Int { .. } | Node::Float32 => leaf(Column::fixed(), 4),
        Node::Long { .. } | Node::Float64 => leaf(Column::fixed(), 8),
        Node::Bytes { .. } | Node::Enum { .. } | Node::Fixed { .. } => leaf(Column::utf8(), 0),
        Node::Optional { inner, .. } => out_of(inner),
        Node::Record { children } => Out::Struct {
            validity: Bits::default(),
            children: children.iter().map(out_of).collect(),
        },
    }
}

/// A varint of up to 10 bytes whose value fits 64 bits (the compiled reader's `bigVarint`).
fn big_varint(buf: &[u8], mut pos: usize) -> Option<(i64, usize)> {
    let mut raw: u128 = 0;
    for i in 0..10 {
        let b = *buf.get(pos)?;
        pos += 1;
        raw |= u128::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return u64::try_from(raw).ok().map(|r| (zigzag(r), pos));
        }
    }
    None
}

/// A length or count: a non-negative exact varint.
#[inline]
fn length(buf: &[u8], pos: usize) -> Option<(usize, usize)> {
    let (n, after) = varint(buf, pos)?;
    (n >= 0).then_some((n as usize, after))
}

#[inline]
fn within(n: i64, min: f64, max: f64) -> bool {
    // n is below 2^53 in magnitude: exact as an f64, as it is a number in JavaScript.
    let x = n as f64;
    x >= min && x <= max
}

impl Node {
    /// The position after the value at `pos`, or None when the reference must read it.
    pub fn check(&self, buf: &[u8], pos: usize) -> Option<usize> {
        match self {
            Node::Bool => (pos < buf.len()).then_some(pos + 1),
            Node::Int { min, max } => {
                let (n, after) = varint(buf, pos)?;
                within(n, *min, *max).then_some(after)
            }
            Node::Long { big, min, max } => match varint(buf, pos) {
                Some((n, after)) => within(n, *min, *max).then_some(after),
                None if *big => big_varint(buf, pos).map(|(_, after)| after),
                None => None,
            },
            Node::Float32 => {
                let bytes: [u8; 4] = buf.get(pos..pos + 4)?.try_into().ok()?;
                f32::from_le_bytes(bytes).is_finite().then_some(pos + 4)
            }
            Node::Float64 => (pos + 8 <= buf.len()).then_some(pos + 8),
            Node::Bytes { utf8 } => {
                let (n, start) = length(buf, pos)?;
                let bytes = buf.get(start..start.checked_add(n)?)?;
                (!*utf8 || std::str::from_utf8(bytes).is_ok()).then_some(start + n)
            }
            Node::Enum { symbols } => {
                let (i, after) = varint(buf, pos)?;
                (i >= 0 && (i as usize) < symbols.len()).then_some(after)
            }
            Node::Fixed { size } => (pos + size <= buf.len()).then_some(pos + size),
            Node::Optional {
                null_index,
                value_index,
                inner,
            } => {
                let (i, after) = varint(buf, pos)?;
                if i == *null_index && i >= 0 {
                    Some(after)
                } else if i == *value_index {
                    inner.check(buf, after)
                } else {
                    None
                }
            }
            Node::Record { children } => children.iter().try_fold(pos, |p, c| c.check(buf, p)),
        }
    }

    /// Appends the value at `pos`, which `check` took; returns the position after it.
    pub fn append(&self, buf: &[u8], pos: usize, out: &mut Out) -> usize {
        match (self, out) {
            (
                Node::Optional {
                    null_index, inner, ..
                },
                out,
            ) => {
                let (i, after) = varint(buf, pos).expect("checked");
                if i == *null_index {
                    out.push_null();
                    after
                } else {
                    inner.append(buf, after, out)
                }
            }
            (
                Node::Record { children },
                Out::Struct {
                    validity,
                    children: outs,
                },
            ) => {
                let mut p = pos;
                for (child, out) in children.iter().zip(outs.iter_mut()) {
                    p = child.append(buf, p, out);
                }
                validity.push(true);
                p
            }
            (node, Out::Leaf { column, .. }) => node.append_leaf(buf, pos, column),
            _ => unreachable!("a node's column is made from it"),
        }
    }

    fn append_leaf(&self, buf: &[u8], pos: usize, column: &mut Column) -> usize {
        match self {
            Node::Bool => {
                column.push_bool(buf[pos] != 0);
                pos + 1
            }
            Node::Int { .. } => {
                let (n, after) = varint(buf, pos).expect("checked");
                column.push_fixed(&(n as i32).to_le_bytes());
                after
            }
            Node::Long { .. } => {
                let (n, after) = varint(buf, pos)
                    .or_else(|| big_varint(buf, pos))
                    .expect("checked");
                column.push_fixed(&n.to_le_bytes());
                after
            }
            Node::Float32 => {
                column.push_fixed(&buf[pos..pos + 4]);
                pos + 4
            }
            Node::Float64 => {
                column.push_fixed(&buf[pos..pos + 8]);
                pos + 8
            }
            Node::Bytes { .. } => {
                let (n, start) = length(buf, pos).expect("checked");
                column.push_bytes(&buf[start..start + n]);
                start + n
            }
            Node::Enum { symbols } => {
                let (i, after) = varint(buf, pos).expect("checked");
                column.push_bytes(&symbols[i as usize]);
                after
            }
            Node::Fixed { size } => {
                column.push_bytes(&buf[pos..pos + size]);
                pos + size
            }
            Node::Optional { .. } | Node::Record { .. } => unreachable!("not a leaf"),
        }
    }
}

/// A top-level record's fields and their columns: checks a framed datum whole (nothing may
/// follow it), then appends it.
pub struct Datum<'a> {
    pub fields: &'a [Node],
}

impl Datum<'_> {
    pub fn check(&self, record: &[u8]) -> bool {
        if record.len() < HEADER_BYTES || record[0] != 0 {
            return false;
        }
        self.fields
            .iter()
            .try_fold(HEADER_BYTES, |p, f| f.check(record, p))
            == Some(record.len())
    }

    pub fn append(&self, record: &[u8], outs: &mut [Out]) {
        let mut p = HEADER_BYTES;
        for (field, out) in self.fields.iter().zip(outs.iter_mut()) {
            p = field.append(record, p, out);
        }
    }
}
