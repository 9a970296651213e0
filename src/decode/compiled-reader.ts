import type { DeclaredField } from '../config';
import type { AvroOp } from './avro/native-ops';
import type { ProtobufMessageOp } from './protobuf/native-ops';
import type { ColumnBuilder } from './column-builder';

/**
 * A reader compiled once per writer schema (Avro: avro/compiled-reader.ts) or message type
 * (Protobuf: protobuf/compiled-reader.ts) that reads a framed value's bytes straight into the
 * column builders, for the records it reads exactly as the format's reference decoder would.
 */
export interface CompiledReader {
  /** The writer's top-level fields' column types, in the order `append` takes builders. */
  readonly fields: readonly { readonly name: string; readonly field: DeclaredField }[];
  /** Whether `append` stores the framed value at `buf[start, end)` exactly as the reference decoder would. */
  check(buf: Buffer, start: number, end: number): boolean;
  /** Appends a checked value's fields, each into `builders[i]` (undefined: skipped). */
  append(buf: Buffer, start: number, end: number, builders: readonly (ColumnBuilder | undefined)[]): void;
  /**
   * The same reading for the native reader (native-registry-columns.ts), when it has all of
   * it: a whole batch of the writer's values is then read there at once.
   */
  readonly native?: NativeProgram;
}

/** A compiled reader's reading as the native reader takes it, per format. */
export type NativeProgram =
  /** Every top-level field of an Avro record. */
  | { readonly format: 'avro'; readonly fields: readonly AvroOp[] }
  /** A Protobuf message type, its values framed with the message-index list `prefix` (bytes). */
  | { readonly format: 'protobuf'; readonly prefix: readonly number[]; readonly message: ProtobufMessageOp };
