//! The framing and varints both registry formats' readers share (avro.rs, protobuf.rs).

/// The magic byte and the four bytes of the schema id before every framed value.
pub const HEADER_BYTES: usize = 5;
const TWO_53: u64 = 1 << 53;

/// An unsigned varint of at most `max_bytes` bytes below `end`, whose value is below 2^53:
/// what the compiled readers take as a JavaScript number, exactly. Returns it and the
/// position after.
#[inline]
pub fn varint(buf: &[u8], mut pos: usize, end: usize, max_bytes: usize) -> Option<(u64, usize)> {
    let mut raw: u64 = 0;
    for i in 0..max_bytes {
        if pos >= end {
            return None;
        }
        let b = buf[pos];
        pos += 1;
        raw |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return (raw < TWO_53).then_some((raw, pos));
        }
    }
    None
}

#[inline]
pub fn zigzag(raw: u64) -> i64 {
    ((raw >> 1) as i64) ^ -((raw & 1) as i64)
}
