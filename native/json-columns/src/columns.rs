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
                data.reserve(value_bytes);
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
