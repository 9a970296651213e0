//! A strict JSON reader over one record's bytes (RFC 8259, what `JSON.parse` accepts).
//!
//! Every method either consumes a whole token or returns `Err(Reject)`. A rejection never
//! means "the record is bad": it means "let the TypeScript decoder read this one", which
//! gives the dead-letter reason or, for a form this reader does not take, the value.

/// This reader does not take the record: the TypeScript decoder decides it.
#[derive(Debug)]
pub struct Reject;

pub type Read<T> = Result<T, Reject>;

/// Deeper values are left to the TypeScript decoder (JSON.parse takes them; nothing here needs them).
pub const MAX_DEPTH: usize = 128;

/// A JSON number token as written.
pub struct NumberToken<'a> {
    pub text: &'a [u8],
    pub negative: bool,
    /// The digits before any fraction or exponent (no sign).
    pub integer: &'a [u8],
    /// The digits after the point; empty when there is none.
    pub fraction: &'a [u8],
    pub has_exponent: bool,
}

pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    #[inline]
    pub fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    #[inline]
    pub fn skip_whitespace(&mut self) {
        while let Some(b) = self.peek() {
            if b == b' ' || b == b'\n' || b == b'\r' || b == b'\t' {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    pub fn at_end(&self) -> bool {
        self.pos == self.bytes.len()
    }

    #[inline]
    pub fn expect(&mut self, byte: u8) -> Read<()> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(Reject)
        }
    }

    /// `true`, `false` or `null` (the caller has seen its first byte).
    pub fn literal(&mut self, word: &[u8]) -> Read<()> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(Reject)
        }
    }

    /// A string whose opening quote is next. Returns its bytes without escapes when it has
    /// none; otherwise decodes it into `scratch` and returns `None` (the text is in `scratch`
    /// from `scratch_start`). A lone UTF-16 surrogate is a rejection: UTF-8 cannot hold it.
    pub fn string(&mut self, scratch: &mut Vec<u8>) -> Read<Option<&'a [u8]>> {
        self.expect(b'"')?;
        let start = self.pos;
        loop {
            self.skip_plain_string_bytes();
            let b = *self.bytes.get(self.pos).ok_or(Reject)?;
            match b {
                b'"' => {
                    let text = &self.bytes[start..self.pos];
                    self.pos += 1;
                    return Ok(Some(text));
                }
                b'\\' => {
                    scratch.extend_from_slice(&self.bytes[start..self.pos]);
                    self.escaped_rest(scratch)?;
                    return Ok(None);
                }
                0..=0x1f => return Err(Reject),
                _ => self.pos += 1,
            }
        }
    }

    /// Skips string bytes eight at a time while none of them is a quote, a backslash or a
    /// control character (most of a log line); the byte loop takes the rest.
    #[inline]
    fn skip_plain_string_bytes(&mut self) {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGHS: u64 = 0x8080_8080_8080_8080;
        let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
        while let Some(chunk) = self.bytes.get(self.pos..self.pos + 8) {
            let v = u64::from_le_bytes(chunk.try_into().unwrap());
            let special = has_zero(v ^ (ONES * b'"' as u64))
                | has_zero(v ^ (ONES * b'\\' as u64))
                // Bytes below 0x20 (a byte of 0x80 and up may raise it too: then the byte loop looks).
                | (v.wrapping_sub(ONES * 0x20) & !v & HIGHS);
            if special != 0 {
                return;
            }
            self.pos += 8;
        }
    }

    /// The rest of a string from its first backslash, decoded into `out`.
    fn escaped_rest(&mut self, out: &mut Vec<u8>) -> Read<()> {
        loop {
            let b = *self.bytes.get(self.pos).ok_or(Reject)?;
            match b {
                b'"' => {
                    self.pos += 1;
                    return Ok(());
                }
                b'\\' => {
                    self.pos += 1;
                    let e = *self.bytes.get(self.pos).ok_or(Reject)?;
                    self.pos += 1;
                    match e {
                        b'"' => out.push(b'"'),
                        b'\\' => out.push(b'\\'),
                        b'/' => out.push(b'/'),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let unit = self.hex4()?;
                            let code = if (0xd800..0xdc00).contains(&unit) {
                                // Only a low surrogate escape right after makes a character.
                                if self.bytes.get(self.pos..self.pos + 2) != Some(b"\\u") {
                                    return Err(Reject);
                                }
                                self.pos += 2;
                                let low = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&low) {
                                    return Err(Reject);
                                }
                                0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00)
                            } else if (0xdc00..0xe000).contains(&unit) {
                                return Err(Reject);
                            } else {
                                unit
                            };
                            let c = char::from_u32(code).ok_or(Reject)?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return Err(Reject),
                    }
                }
                0..=0x1f => return Err(Reject),
                _ => {
                    out.push(b);
                    self.pos += 1;
                }
            }
        }
    }

    fn hex4(&mut self) -> Read<u32> {
        let digits = self.bytes.get(self.pos..self.pos + 4).ok_or(Reject)?;
        let mut value = 0u32;
        for &d in digits {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(Reject),
            };
            value = value * 16 + v as u32;
        }
        self.pos += 4;
        Ok(value)
    }

    /// A number token: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    pub fn number(&mut self) -> Read<NumberToken<'a>> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let integer_start = self.pos;
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(Reject),
        }
        let integer = &self.bytes[integer_start..self.pos];
        let mut fraction: &[u8] = &[];
        if self.peek() == Some(b'.') {
            self.pos += 1;
            let fraction_start = self.pos;
            self.digits();
            if self.pos == fraction_start {
                return Err(Reject);
            }
            fraction = &self.bytes[fraction_start..self.pos];
        }
        let mut has_exponent = false;
        if matches!(self.peek(), Some(b'e' | b'E')) {
            has_exponent = true;
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            let exponent_start = self.pos;
            self.digits();
            if self.pos == exponent_start {
                return Err(Reject);
            }
        }
        Ok(NumberToken {
            text: &self.bytes[start..self.pos],
            negative,
            integer,
            fraction,
            has_exponent,
        })
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    /// Reads any value and drops it (a key no column names): it must still be valid JSON.
    pub fn skip_value(&mut self, scratch: &mut Vec<u8>, depth: usize) -> Read<()> {
        if depth > MAX_DEPTH {
            return Err(Reject);
        }
        match self.peek().ok_or(Reject)? {
            b'"' => {
                let mark = scratch.len();
                self.string_allowing_lone_surrogates(scratch)?;
                scratch.truncate(mark);
                Ok(())
            }
            b'{' => {
                self.pos += 1;
                self.skip_whitespace();
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                    return Ok(());
                }
                loop {
                    self.skip_whitespace();
                    let mark = scratch.len();
                    self.string_allowing_lone_surrogates(scratch)?;
                    scratch.truncate(mark);
                    self.skip_whitespace();
                    self.expect(b':')?;
                    self.skip_whitespace();
                    self.skip_value(scratch, depth + 1)?;
                    self.skip_whitespace();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {
                            self.pos += 1;
                            return Ok(());
                        }
                        _ => return Err(Reject),
                    }
                }
            }
            b'[' => {
                self.pos += 1;
                self.skip_whitespace();
                if self.peek() == Some(b']') {
                    self.pos += 1;
                    return Ok(());
                }
                loop {
                    self.skip_whitespace();
                    self.skip_value(scratch, depth + 1)?;
                    self.skip_whitespace();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {
                            self.pos += 1;
                            return Ok(());
                        }
                        _ => return Err(Reject),
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(|_| ()),
        }
    }

    /// A string that is only checked, never kept: JSON.parse takes lone surrogate escapes
    /// in values nobody reads, so this must too.
    fn string_allowing_lone_surrogates(&mut self, _scratch: &mut Vec<u8>) -> Read<()> {
        self.expect(b'"')?;
        loop {
            let b = *self.bytes.get(self.pos).ok_or(Reject)?;
            self.pos += 1;
            match b {
                b'"' => return Ok(()),
                b'\\' => {
                    let e = *self.bytes.get(self.pos).ok_or(Reject)?;
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            self.hex4()?;
                        }
                        _ => return Err(Reject),
                    }
                }
                0..=0x1f => return Err(Reject),
                _ => {}
            }
        }
    }
}
