//! JSON records (and Avro datums, avro.rs) into Arrow column buffers, for kafka-lance's
//! staging workers.
//!
//! The TypeScript decoder (src/decode/record-decoder.ts) is the reference: this one
//! takes only records whose every declared value it reads exactly as that decoder
//! would, and returns the others as rejected, in order, for it to decide (a dead letter
//! with its reason, or a form only it reads). It allocates no per-record objects in
//! JavaScript: that garbage, not the parsing, was most of the staging workers' time.

mod avro;
mod canonical;
mod columns;
mod fields;
mod protobuf;
mod reader;
mod wire;

use avro::{out_of, Datum, Node};
use columns::{Column, Out, Values};
use fields::{append_record, read_record, EpochUnit, Field, Kind, Pending};
use napi::bindgen_prelude::{Buffer, Uint32Array, Uint8Array};
use napi::{Error, Result, Status};
use napi_derive::napi;

/// One column's Arrow buffers.
#[napi(object)]
pub struct ColumnBuffers {
    /// Fixed-width values, boolean bits, or Utf8 bytes.
    pub data: Buffer,
    /// Utf8 only: rows + 1 little-endian i32 offsets.
    pub offsets: Option<Buffer>,
    /// One bit per row; absent when no row is null.
    pub validity: Option<Buffer>,
    pub null_count: u32,
}

#[napi(object)]
pub struct DecodedColumns {
    /// Rows appended: the records not rejected, in order.
    pub rows: u32,
    /// Indices (into the spans) of the records left to the TypeScript decoder, ascending.
    pub rejected: Vec<u32>,
    pub columns: Vec<ColumnBuffers>,
}

/// A consumer's declared fields, ready to decode batches.
#[napi]
pub struct JsonColumns {
    fields: Vec<Field>,
    event_time: Option<usize>,
}

#[napi]
impl JsonColumns {
    /// `kinds` and `units`: the codes of fields.rs; `event_time`: the index of the
    /// event-time field (a timestamp field), or -1; `dims`: each vector field's elements
    /// (0 for the others; absent when there is no vector field).
    #[napi(constructor)]
    pub fn new(
        names: Vec<String>,
        kinds: Vec<u32>,
        nullable: Vec<bool>,
        units: Vec<u32>,
        event_time: i32,
        dims: Option<Vec<u32>>,
    ) -> Result<Self> {
        let dims = dims.unwrap_or_else(|| vec![0; names.len()]);
        if kinds.len() != names.len()
            || nullable.len() != names.len()
            || units.len() != names.len()
            || dims.len() != names.len()
        {
            return Err(Error::new(
                Status::InvalidArg,
                "names, kinds, nullable, units and dims differ in length",
            ));
        }
        let mut fields = Vec::with_capacity(names.len());
        for (i, name) in names.into_iter().enumerate() {
            let kind = Kind::from_code(kinds[i])
                .ok_or_else(|| Error::new(Status::InvalidArg, format!("unknown kind {}", kinds[i])))?;
            let unit = EpochUnit::from_code(units[i])
                .ok_or_else(|| Error::new(Status::InvalidArg, format!("unknown unit {}", units[i])))?;
            fields.push(Field {
                name: name.into_bytes(),
                kind,
                nullable: nullable[i],
                unit,
                dim: dims[i] as usize,
            });
            if kind == Kind::VectorF32 && dims[i] == 0 {
                return Err(Error::new(Status::InvalidArg, "a vector field of no dimension"));
            }
        }
        let event_time = usize::try_from(event_time).ok();
        if let Some(e) = event_time {
            if fields.get(e).map(|f| f.kind) != Some(Kind::Timestamp) {
                return Err(Error::new(
                    Status::InvalidArg,
                    "the event-time field is not a timestamp field",
                ));
            }
        }
        Ok(JsonColumns { fields, event_time })
    }

    /// Decodes the records at `spans` (start, length pairs into `data`).
    #[napi(catch_unwind)]
    pub fn decode(&self, data: Uint8Array, spans: Uint32Array) -> Result<DecodedColumns> {
        let bytes: &[u8] = &data;
        let spans: &[u32] = &spans;
        if !spans.len().is_multiple_of(2) {
            return Err(Error::new(
                Status::InvalidArg,
                "spans must be (start, length) pairs",
            ));
        }
        let mut columns: Vec<Column> = self.fields.iter().map(|f| f.kind.column()).collect();
        let mut pending = vec![Pending::Absent; self.fields.len()];
        let mut scratch = Vec::with_capacity(1024);
        let mut rejected = Vec::new();
        let mut rows = 0u32;
        for (index, span) in spans.chunks_exact(2).enumerate() {
            let (start, length) = (span[0] as usize, span[1] as usize);
            let record = bytes
                .get(start..start + length)
                .ok_or_else(|| Error::new(Status::InvalidArg, "a span lies outside the data"))?;
            // TextDecoder (fatal) refuses the same bytes; a UTF-8 BOM it would strip is not JSON here.
            let accepted = std::str::from_utf8(record).is_ok()
                && read_record(&self.fields, record, &mut pending, &mut scratch).is_ok()
                && append_record(
                    &self.fields,
                    &pending,
                    record,
                    &scratch,
                    self.event_time,
                    &mut columns,
                )
                .is_ok();
            if accepted {
                rows += 1;
            } else {
                rejected.push(index as u32);
            }
        }
        if columns.iter().any(|c| c.value_bytes() > i32::MAX as usize) {
            return Err(Error::new(
                Status::GenericFailure,
                "a string column passed 2 GiB in one batch",
            ));
        }
        Ok(DecodedColumns {
            rows,
            rejected,
            columns: columns.into_iter().map(buffers).collect(),
        })
    }
}

/// A writer schema's compiled reading (avro.rs), ready to decode batches of its datums.
#[napi]
pub struct AvroColumns {
    fields: Vec<Node>,
    /// Each leaf column's value bytes per row in the last batch (depth first).
    bytes_per_row: Vec<f64>,
}

#[napi]
impl AvroColumns {
    /// `program`: the top-level record in avro.rs's codes; `symbols`: its enums' symbols.
    #[napi(constructor)]
    pub fn new(program: Vec<f64>, symbols: Vec<String>) -> Result<Self> {
        let mut at = 0;
        let top =
            avro::parse(&program, &mut at, &symbols).map_err(|why| Error::new(Status::InvalidArg, why))?;
        if at != program.len() {
            return Err(Error::new(
                Status::InvalidArg,
                "the program goes on after its record",
            ));
        }
        match top {
            Node::Record { children } => Ok(AvroColumns {
                fields: children,
                bytes_per_row: Vec::new(),
            }),
            _ => Err(Error::new(Status::InvalidArg, "the program is not a record")),
        }
    }

    /// Decodes the framed datums at `spans` (start, length pairs into `data`). The columns
    /// come depth first: a struct's own (validity only, empty data), then its fields'.
    #[napi(catch_unwind)]
    pub fn decode(&mut self, data: Uint8Array, spans: Uint32Array) -> Result<DecodedColumns> {
        let datum = Datum { fields: &self.fields };
        let outs = self.fields.iter().map(out_of).collect();
        decode_framed(
            &data,
            &spans,
            outs,
            &mut self.bytes_per_row,
            |record| datum.check(record),
            |record, outs| datum.append(record, outs),
        )
    }
}

/// A Protobuf message type's compiled reading (protobuf.rs), ready to decode batches of its
/// messages framed with one message-index list.
#[napi]
pub struct ProtobufColumns {
    message: protobuf::Message,
    prefix: Vec<u8>,
    bytes_per_row: Vec<f64>,
}

#[napi]
impl ProtobufColumns {
    /// `program`: the message in protobuf.rs's codes; `symbols`: its enums' names; `prefix`:
    /// the bytes of the message-index list after the schema id.
    #[napi(constructor)]
    pub fn new(program: Vec<f64>, symbols: Vec<String>, prefix: Vec<u32>) -> Result<Self> {
        let mut at = 0;
        let message = protobuf::parse(&program, &mut at, &symbols)
            .map_err(|why| Error::new(Status::InvalidArg, why))?;
        if at != program.len() {
            return Err(Error::new(
                Status::InvalidArg,
                "the program goes on after its message",
            ));
        }
        let prefix = prefix
            .into_iter()
            .map(|b| u8::try_from(b).map_err(|_| Error::new(Status::InvalidArg, "a prefix byte above 255")))
            .collect::<Result<Vec<u8>>>()?;
        Ok(ProtobufColumns {
            message,
            prefix,
            bytes_per_row: Vec::new(),
        })
    }

    /// Decodes the framed messages at `spans`, as AvroColumns.decode does its datums.
    #[napi(catch_unwind)]
    pub fn decode(&mut self, data: Uint8Array, spans: Uint32Array) -> Result<DecodedColumns> {
        let framed = protobuf::Framed {
            message: &self.message,
            prefix: &self.prefix,
        };
        decode_framed(
            &data,
            &spans,
            self.message.outs(),
            &mut self.bytes_per_row,
            |record| framed.check(record),
            |record, outs| framed.append(record, outs),
        )
    }
}

/// A batch of framed values through a registry format's reader: each value checked whole,
/// then appended, or rejected (its index) for the TypeScript decoder. `bytes_per_row` is the
/// last batch's hint for each leaf's room, and is updated.
fn decode_framed(
    bytes: &[u8],
    spans: &[u32],
    mut outs: Vec<Out>,
    bytes_per_row: &mut Vec<f64>,
    check: impl Fn(&[u8]) -> bool,
    append: impl Fn(&[u8], &mut [Out]),
) -> Result<DecodedColumns> {
    if !spans.len().is_multiple_of(2) {
        return Err(Error::new(
            Status::InvalidArg,
            "spans must be (start, length) pairs",
        ));
    }
    let mut hints = bytes_per_row.iter().copied();
    let input = spans.chunks_exact(2).map(|s| s[1] as usize).sum();
    for out in &mut outs {
        out.reserve(spans.len() / 2, input, &mut hints);
    }
    let mut rejected = Vec::new();
    let mut rows = 0u32;
    for (index, span) in spans.chunks_exact(2).enumerate() {
        let (start, length) = (span[0] as usize, span[1] as usize);
        let record = start
            .checked_add(length)
            .and_then(|end| bytes.get(start..end))
            .ok_or_else(|| Error::new(Status::InvalidArg, "a span lies outside the data"))?;
        if check(record) {
            append(record, &mut outs);
            rows += 1;
        } else {
            rejected.push(index as u32);
        }
    }
    if rows > 0 {
        bytes_per_row.clear();
        for out in &outs {
            out.bytes_per_row(rows as usize, bytes_per_row);
        }
    }
    let mut columns = Vec::new();
    for out in outs {
        flatten(out, &mut columns)?;
    }
    Ok(DecodedColumns {
        rows,
        rejected,
        columns,
    })
}

fn flatten(out: Out, into: &mut Vec<ColumnBuffers>) -> Result<()> {
    match out {
        Out::Leaf { column, .. } => {
            if column.value_bytes() > i32::MAX as usize {
                return Err(Error::new(
                    Status::GenericFailure,
                    "a string or bytes column passed 2 GiB in one batch",
                ));
            }
            into.push(buffers(column));
        }
        Out::Struct { validity, children } => {
            let null_count = validity.zeros as u32;
            into.push(ColumnBuffers {
                data: Vec::<u8>::new().into(),
                offsets: None,
                validity: (null_count > 0).then(|| validity.bytes.into()),
                null_count,
            });
            for child in children {
                flatten(child, into)?;
            }
        }
    }
    Ok(())
}

fn buffers(column: Column) -> ColumnBuffers {
    let null_count = column.validity.zeros as u32;
    let validity = if null_count > 0 {
        Some(column.validity.bytes.into())
    } else {
        None
    };
    match column.values {
        Values::Utf8 { offsets, data } => ColumnBuffers {
            data: data.into(),
            offsets: Some(offsets.into()),
            validity,
            null_count,
        },
        Values::Fixed { data } => ColumnBuffers {
            data: data.into(),
            offsets: None,
            validity,
            null_count,
        },
        Values::Bool { bits } => ColumnBuffers {
            data: bits.bytes.into(),
            offsets: None,
            validity,
            null_count,
        },
    }
}
