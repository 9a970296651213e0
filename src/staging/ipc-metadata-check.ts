/**
 * A bounds check of an Arrow IPC message's flatbuffer metadata, run before apache-arrow
 * decodes it.
 *
 * apache-arrow (through the flatbuffers runtime) trusts every length and offset in a
 * message's metadata: flatbuffers' JavaScript reader has no verifier, and a read past
 * the end of its bytes yields zeros instead of an error. One flipped bit in a vector's
 * length (say, a schema's field count) then makes the decoder build hundreds of millions
 * of fields out of zeros until the heap runs out, and the process dies in recovery at
 * every start. Recovery must read open parts before any checksum can vouch for them, so
 * their metadata is checked here first, the way flatbuffers' own C++ and Rust verifiers
 * do: every table, vtable, vector and string lies within the bytes, and the tables the
 * decoder would visit are bounded by the bytes they need (four each at the least), so a
 * decode of damaged metadata costs no more than a decode of sound metadata of its size.
 * Nesting has no limit of its own: offsets only point forward, so no cycle can form, and
 * a schema nested deeper than the stack (which apache-arrow's recursive decoder could not
 * read either) is refused as such.
 *
 * Only the tables apache-arrow decodes are described: Message, Schema, Field and its
 * type, DictionaryEncoding, KeyValue, RecordBatch and DictionaryBatch. Slots are the
 * field indexes of Arrow's `Message.fbs` and `Schema.fbs`.
 */

/** How one slot of a table is laid out, as far as bounds go. */
type Slot =
  | { readonly kind: 'scalar' }
  | { readonly kind: 'string' }
  | { readonly kind: 'vector'; readonly elementBytes: number }
  | { readonly kind: 'table'; readonly shape: Shape }
  | { readonly kind: 'tables'; readonly shape: Shape }
  /** A union's value: its shape depends on the tag in slot `tagSlot`. */
  | { readonly kind: 'union'; readonly tagSlot: number; readonly shapeOf: (tag: number) => Shape };

/** The slots of a table that hold offsets (scalars need no check beyond the table's size). */
type Shape = ReadonlyMap<number, Slot>;

const shape = (slots: Record<number, Slot>): Shape =>
  new Map(Object.entries(slots).map(([slot, layout]) => [Number(slot), layout]));

const scalarsOnly: Shape = shape({});
const keyValue = shape({ 0: { kind: 'string' }, 1: { kind: 'string' } });
const customMetadata: Slot = { kind: 'tables', shape: keyValue };

/** Arrow's `Type` union: Timestamp (10) names a time zone, Union (14) lists type ids. */
const typeShapes: ReadonlyMap<number, Shape> = new Map([
  [10, shape({ 1: { kind: 'string' } })],
  [14, shape({ 1: { kind: 'vector', elementBytes: 4 } })],
]);
const typeShapeOf = (tag: number): Shape => typeShapes.get(tag) ?? scalarsOnly;

const dictionaryEncoding = shape({ 1: { kind: 'table', shape: scalarsOnly } });
const fieldSlots = new Map<number, Slot>([
  [0, { kind: 'string' }],
  [3, { kind: 'union', tagSlot: 2, shapeOf: typeShapeOf }],
  [4, { kind: 'table', shape: dictionaryEncoding }],
  [6, customMetadata],
]);
const field: Shape = fieldSlots;
fieldSlots.set(5, { kind: 'tables', shape: field });

const schema = shape({
  1: { kind: 'tables', shape: field },
  2: customMetadata,
  3: { kind: 'vector', elementBytes: 8 },
});
const recordBatch = shape({
  1: { kind: 'vector', elementBytes: 16 },
  2: { kind: 'vector', elementBytes: 16 },
  3: { kind: 'table', shape: scalarsOnly },
});
const dictionaryBatch = shape({ 1: { kind: 'table', shape: recordBatch } });
/** Arrow's `MessageHeader` union: Schema 1, DictionaryBatch 2, RecordBatch 3 (tensors are not read). */
const headerShapes: ReadonlyMap<number, Shape> = new Map([
  [1, schema],
  [2, dictionaryBatch],
  [3, recordBatch],
]);
const message = shape({
  2: { kind: 'union', tagSlot: 1, shapeOf: (tag) => headerShapes.get(tag) ?? scalarsOnly },
  4: customMetadata,
});

class MetadataDamage extends Error {}

/**
 * Why the flatbuffer metadata of one IPC message (the bytes after its 8-byte prefix)
 * cannot be decoded safely, or undefined when every offset and length in it is in bounds.
 */
export function metadataProblem(metadata: Uint8Array): string | undefined {
  const walk = new BoundedWalk(metadata);
  try {
    if (metadata.byteLength < 4) throw new MetadataDamage('shorter than a root offset');
    walk.table(walk.offsetAt(0), message);
    return undefined;
  } catch (error) {
    if (error instanceof MetadataDamage) return `message metadata: ${error.message}`;
    // Every read is bounds-checked first: a RangeError here is the stack's.
    if (error instanceof RangeError) return 'message metadata: tables nested deeper than the stack allows';
    throw error;
  }
}

class BoundedWalk {
  readonly #view: DataView;
  readonly #length: number;
  /** Tables left to visit: each needs at least four bytes of its own. */
  #tablesLeft: number;

  constructor(bytes: Uint8Array) {
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.#length = bytes.byteLength;
    this.#tablesLeft = Math.floor(bytes.byteLength / 4);
  }

  /** The position an unsigned offset stored at `at` points to. */
  offsetAt(at: number): number {
    this.#within(at, 4, 'offset');
    const target = at + this.#view.getUint32(at, true);
    this.#within(target, 1, 'offset target');
    return target;
  }

  table(at: number, slots: Shape): void {
    if (--this.#tablesLeft < 0) throw new MetadataDamage('more tables than its bytes can hold');
    this.#within(at, 4, 'table');
    const vtable = at - this.#view.getInt32(at, true);
    this.#within(vtable, 4, 'vtable');
    const vtableBytes = this.#view.getUint16(vtable, true);
    const tableBytes = this.#view.getUint16(vtable + 2, true);
    if (vtableBytes < 4 || vtableBytes % 2 !== 0)
      throw new MetadataDamage(`a vtable of ${vtableBytes} bytes`);
    this.#within(vtable, vtableBytes, 'vtable');
    this.#within(at, Math.max(tableBytes, 4), 'table');
    const slotAt = (slot: number): number | undefined => {
      if (4 + 2 * slot >= vtableBytes) return undefined;
      const offset = this.#view.getUint16(vtable + 4 + 2 * slot, true);
      if (offset === 0) return undefined;
      if (offset >= tableBytes) throw new MetadataDamage(`slot ${slot} outside its table`);
      return at + offset;
    };
    for (const [slot, layout] of slots) {
      const fieldAt = slotAt(slot);
      if (fieldAt !== undefined) this.#slot(fieldAt, layout, slotAt);
    }
  }

  #slot(at: number, layout: Slot, slotAt: (slot: number) => number | undefined): void {
    switch (layout.kind) {
      case 'scalar':
        return;
      case 'string':
        // A string is a vector of bytes followed by a terminating zero.
        this.#vector(this.offsetAt(at), 1, 1);
        return;
      case 'vector':
        this.#vector(this.offsetAt(at), layout.elementBytes, 0);
        return;
      case 'table':
        this.table(this.offsetAt(at), layout.shape);
        return;
      case 'tables': {
        const start = this.offsetAt(at);
        const count = this.#vector(start, 4, 0);
        for (let i = 0; i < count; i += 1) this.table(this.offsetAt(start + 4 + 4 * i), layout.shape);
        return;
      }
      case 'union': {
        const tagAt = slotAt(layout.tagSlot);
        const tag = tagAt === undefined ? 0 : this.#view.getUint8(tagAt);
        this.table(this.offsetAt(at), layout.shapeOf(tag));
        return;
      }
    }
  }

  /** Checks a vector of `count` elements at `at` lies within the bytes; returns its count. */
  #vector(at: number, elementBytes: number, trailingBytes: number): number {
    this.#within(at, 4, 'vector length');
    const count = this.#view.getUint32(at, true);
    this.#within(at + 4, count * elementBytes + trailingBytes, `vector of ${count} elements`);
    return count;
  }

  #within(at: number, bytes: number, what: string): void {
    if (at < 0 || bytes < 0 || at + bytes > this.#length)
      throw new MetadataDamage(`${what} at byte ${at} runs past its ${this.#length} bytes`);
  }
}
