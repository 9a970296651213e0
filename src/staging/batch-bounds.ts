import { DataType, type Data, type RecordBatch } from 'apache-arrow';

/**
 * Why a decoded batch's lengths claim more than its buffers hold, or undefined.
 *
 * apache-arrow takes a record batch's row count and each column's length from the
 * message's metadata and its buffers from the body, and never checks one against the
 * other. A damaged length (a flipped bit in an open part that recovery reads before any
 * checksum can vouch for it) then reads as billions of rows over a few hundred: every
 * loop over the rows runs for hours reading past the data. This holds each column, to
 * any depth, to what its buffers can cover, at a cost per column, not per row.
 */
export function batchBoundsProblem(batch: RecordBatch): string | undefined {
  for (const [i, field] of batch.schema.fields.entries()) {
    const column = batch.data.children[i];
    if (!column) return `column ${field.name} is missing`;
    if (column.length !== batch.numRows)
      return `column ${field.name} has ${column.length} rows in a batch of ${batch.numRows}`;
    const problem = dataProblem(column, field.name);
    if (problem) return problem;
  }
  return undefined;
}

function dataProblem(d: Data, name: string): string | undefined {
  const end = d.offset + d.length;
  if (d.length < 0 || d.offset < 0) return `column ${name} has a negative length or offset`;
  if (d.nullCount > 0 && (d.nullBitmap?.length ?? 0) * 8 < end)
    return `column ${name}: validity bitmap shorter than ${d.length} rows`;
  const type = d.type;
  // Data's buffers are typed per DataType; here any column comes: read them as arrays.
  const valueOffsets = d.valueOffsets as ArrayLike<number | bigint> | undefined;
  const values = d.values as ArrayLike<unknown> | undefined;
  // A column null in every row may come with empty value buffers (a backfilled inferred column).
  if (DataType.isNull(type) || (d.length > 0 && d.nullCount === d.length)) return undefined;
  if (valueOffsets) {
    if (valueOffsets.length < end + 1) return `column ${name}: value offsets shorter than ${d.length} rows`;
    const last = Number(valueOffsets[end]);
    if (Number(valueOffsets[d.offset]) < 0 || last < 0) return `column ${name}: negative value offset`;
    // List and Map keep their values in a child; strings and binaries in their own buffer.
    if (DataType.isList(type) || DataType.isMap(type)) {
      const child = d.children[0];
      if (!child || child.length < last) return `column ${name}: list values shorter than the offsets say`;
      return dataProblem(child, `${name}[]`);
    }
    if ((values?.length ?? 0) < last) return `column ${name}: values shorter than the offsets say`;
    return undefined;
  }
  if (DataType.isStruct(type)) {
    for (const [i, child] of d.children.entries()) {
      if (child.length < end) return `column ${name}: struct field ${i} shorter than ${d.length} rows`;
      const problem = dataProblem(child, `${name}.${type.children[i]?.name ?? i}`);
      if (problem) return problem;
    }
    return undefined;
  }
  if (DataType.isFixedSizeList(type)) {
    const child = d.children[0];
    if (!child || child.length < end * type.listSize)
      return `column ${name}: list values shorter than ${d.length} rows of ${type.listSize}`;
    return dataProblem(child, `${name}[]`);
  }
  if (DataType.isBool(type)) {
    if ((values?.length ?? 0) * 8 < end) return `column ${name}: values shorter than ${d.length} rows`;
    return undefined;
  }
  if (values && values.length < end * d.stride) return `column ${name}: values shorter than ${d.length} rows`;
  return undefined;
}
