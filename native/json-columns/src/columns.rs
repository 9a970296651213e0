//! Arrow column buffers, little-endian, as apache-arrow's `makeData` takes them.

/// A validity (or boolean values) bitmap: bit i of byte i / 8.
#[derive(Default)]
pub struct Bits {
    pub bytes: Vec<u8>,
    pub len: usize,
    pub zeros: usize,
}

impl Bits {
    #[inline]
    pub fn push(&mut self, bit: bool) {
        if self.len.is_multiple_of(8) {
            self.bytes.push(0);
        }
        if bit {
            *self.bytes.last_mut().unwrap() |= 1 << (self.len % 8);
        } else {
            self.zeros += 1;
        }
        self.len += 1;
    }
}

pub enum Values {
    /// Utf8: offsets (i32, one more than rows) and the bytes.
    Utf8 {
        offsets: Vec<u8>,
        data: Vec<u8>,
    },
    /// Int32, Int64, Float64 and Timestamp(ms): `width` bytes per row.
    Fixed {
        data: Vec<u8>,
    },
    Bool {
        bits: Bits,
    },
}

pub struct Column {
    pub values: Values,
    pub validity: Bits,
}

impl Column {
    pub fn utf8() -> Self {
        Column {
            values: Values::Utf8 {
                offsets: 0i32.to_le_bytes().to_vec(),
                data: Vec::new(),
            },
            validity: Bits::default(),
        }
    }

    pub fn fixed() -> Self {
        Column {
            values: Values::Fixed { data: Vec::new() },
            validity: Bits::default(),
        }
    }

    pub fn boolean() -> Self {
        Column {
            values: Values::Bool {
                bits: Bits::default(),
            },
            validity: Bits::default(),
        }
    }

    /// A null row; `width`: the bytes of a fixed-width value.
    pub fn push_null(&mut self, width: usize) {
        self.validity.push(false);
        match &mut self.values {
            Values::Utf8 { offsets, data } => offsets.extend_from_slice(&(data.len() as i32).to_le_bytes()),
            Values::Fixed { data } => data.resize(data.len() + width, 0),
            Values::Bool { bits } => bits.push(false),
        }
    }

    pub fn push_bytes(&mut self, text: &[u8]) {
        self.validity.push(true);
        if let Values::Utf8 { offsets, data } = &mut self.values {
            data.extend_from_slice(text);
            offsets.extend_from_slice(&(data.len() as i32).to_le_bytes());
        }
    }

    pub fn push_fixed(&mut self, bytes: &[u8]) {
        self.validity.push(true);
        if let Values::Fixed { data } = &mut self.values {
            data.extend_from_slice(bytes);
        }
    }

    pub fn push_bool(&mut self, value: bool) {
        self.validity.push(true);
        if let Values::Bool { bits } = &mut self.values {
            bits.push(value);
        }
    }

    /// Room for `rows` more rows of `width` bytes each (fixed-width), or of `value_bytes`
    /// in all (Utf8): one allocation each, where growing by doubling would copy the values
    /// about twice and fault in the pages of every discarded buffer.
    pub fn reserve(&mut self, rows: usize, width: usize, value_bytes: usize) {
        self.validity.bytes.reserve(rows.div_ceil(8) + 1);
        match &mut self.values {
            Values::Utf8 { offsets, data } => {
                offsets.reserve(rows * 4);
                // A hint, not a need: without the room the values grow as they go.
                let _ = data.try_reserve(value_bytes);
            }
            Values::Fixed { data } => data.reserve(rows * width),
            Values::Bool { bits } => bits.bytes.reserve(rows.div_ceil(8) + 1),
        }
    }

    /// The bytes held so far (to refuse a batch whose Utf8 offsets would pass i32).
    pub fn value_bytes(&self) -> usize {
        match &self.values {
            Values::Utf8 { data, .. } => data.len(),
            _ => 0,
        }
    }
}

/// A column of a registry format's reader (avro.rs, protobuf.rs): a leaf's buffers, or a
/// Struct's validity and its fields' columns.
pub enum Out {
    Leaf { column: Column, width: usize },
    Struct { validity: Bits, children: Vec<Out> },
}

impl Out {
    /// Room for `rows` rows: each leaf's values at its bytes per row in `hints` (depth
    /// first; the last batch's, with 1/8 more), taken one by one, and never more than the
    /// batch's `input` bytes: one large record in the last batch must not make a batch of
    /// many small ones ask for gigabytes (an allocation Rust cannot make aborts the process).
    pub fn reserve(&mut self, rows: usize, input: usize, hints: &mut impl Iterator<Item = f64>) {
        match self {
            Out::Leaf { column, width } => {
                let per_row = hints.next().unwrap_or(0.0);
                let wanted = (per_row * 1.125 * rows as f64) as usize;
                column.reserve(rows, *width, wanted.min(input));
            }
            Out::Struct { validity, children } => {
                validity.bytes.reserve(rows.div_ceil(8) + 1);
                children.iter_mut().for_each(|c| c.reserve(rows, input, hints));
            }
        }
    }

    /// Each leaf's value bytes per row (depth first), for the next batch's `reserve`.
    pub fn bytes_per_row(&self, rows: usize, into: &mut Vec<f64>) {
        match self {
            Out::Leaf { column, .. } => into.push(column.value_bytes() as f64 / rows.max(1) as f64),
            Out::Struct { children, .. } => children.iter().for_each(|c| c.bytes_per_row(rows, into)),
        }
    }

    /// A null row (a struct's fields hold nulls there too, as StructBuilder.appendNull writes them).
    pub fn push_null(&mut self) {
        match self {
            Out::Leaf { column, width } => column.push_null(*width),
            Out::Struct { validity, children } => {
                validity.push(false);
                children.iter_mut().for_each(Out::push_null);
            }
        }
    }
}
