import * as net from 'node:net';
import type { ISocketFactory } from 'kafkajs';

/**
 * kafkajs's socket factory, with Kafka's framing done where the bytes are read.
 *
 * A plain socket gives Node a new 64 KiB ArrayBuffer for every read, and kafkajs then
 * concatenates a response's reads into one more Buffer: each fetched byte is allocated twice
 * outside V8's heap and copied once more, and V8 starts full collections on the growth of
 * such memory (bench/hot-path-levers.md, "Kafka's frames read in place"). Here the socket
 * reads through `onread`: once a response's size has arrived, the rest of it is read
 * straight into a Buffer of that size, which kafkajs receives whole as one `data` event and
 * reads in place (one chunk: nothing to concatenate, connection-reads.ts). Sizes and small
 * responses are read into one reused buffer and copied out. The bytes kafkajs sees, and
 * their order, are the same.
 *
 * TLS sockets, and every socket under `KAFKA_LANCE_FRAMED_SOCKET=off`, are kafkajs's own.
 */
export const framedSocketFactory: ISocketFactory = (args) => {
  if (args.ssl || process.env.KAFKA_LANCE_FRAMED_SOCKET === 'off') return kafkajsSocketFactory(args);
  const frames = new FrameAssembler((frame) => socket.emit('data', frame));
  const socket = net.connect(
    {
      host: args.host,
      port: args.port,
      // Node asks for the buffer of each next read after the callback of the last.
      onread: {
        buffer: () => frames.target(),
        callback: (bytes: number, buffer: Uint8Array) => {
          try {
            frames.filled(buffer, bytes);
          } catch (error) {
            // A throw here would skip Node's ask for the next read's buffer, and the next
            // read would land in a frame already handed on: end the connection instead
            // (kafkajs reconnects), never a frame out of step.
            socket.destroy(error instanceof Error ? error : new Error(String(error)));
            return false;
          }
          return true;
        },
      },
    },
    args.onConnect,
  );
  socket.setKeepAlive(true, KEEP_ALIVE_DELAY_MS);
  return socket;
};

// eslint-disable-next-line @typescript-eslint/no-require-imports -- kafkajs internals, pinned at 2.2.4
const kafkajsSocketFactory = (require('kafkajs/src/network/socketFactory') as () => ISocketFactory)();
/** kafkajs 2.2.4's keep-alive delay (network/socketFactory.js), as its own sockets have it. */
const KEEP_ALIVE_DELAY_MS = 60_000;
/** The reused read buffer: Node's own size for a stream's read. */
const READ_BUFFER_BYTES = 64 * 1024;
/**
 * A frame this large is not allocated when its size arrives: its bytes are kept as they come
 * and joined at its end, as kafkajs does. A size read from something that is not a Kafka
 * broker (an HTTP server's "HTTP" reads as 1.2 GB) then costs only what actually arrives.
 * Four times the default fetch (`queue.maxBytes`, 16 MiB): a fetch answer passes its size
 * only by its first record batch (KIP-74).
 */
export const MAX_FRAME_ALLOCATED_AHEAD = 64 * 1024 * 1024;

/** A Kafka response's size prefix: a 4-byte big-endian int32. */
export const FRAME_SIZE_BYTES = 4;

/**
 * Kafka's size-prefixed frames out of a stream of reads: each complete frame (its size
 * prefix included, as kafkajs expects it) is handed to `emit` once, in order. A read goes
 * where `target()` says: into the frame being filled, in place, or into a scratch buffer
 * whose bytes `push` copies out (it may be reused as soon as `push` returns).
 */
export class FrameAssembler {
  readonly #emit: (frame: Buffer) => void;
  readonly #maxAhead: number;
  /** Where a read goes while no frame is being filled in place. */
  readonly #scratch = Buffer.allocUnsafe(READ_BUFFER_BYTES);
  readonly #size = Buffer.alloc(FRAME_SIZE_BYTES);
  #sizeBytes = 0;
  /** The frame being filled (allocated when its size arrived), or undefined. */
  #frame: Buffer | undefined;
  /** A frame above `maxAhead`: copies of its reads so far (the size prefix first). */
  #pieces: Buffer[] | undefined;
  #filled = 0;
  #total = 0;

  constructor(emit: (frame: Buffer) => void, maxAhead = MAX_FRAME_ALLOCATED_AHEAD) {
    this.#emit = emit;
    this.#maxAhead = maxAhead;
  }

  /** The buffer the next read should fill: the rest of the frame being filled, else the scratch buffer. */
  target(): Uint8Array {
    return this.#frame !== undefined ? this.#frame.subarray(this.#filled) : this.#scratch;
  }

  /** A read put `bytes` bytes at the start of `buffer`, which `target()` gave. */
  filled(buffer: Uint8Array, bytes: number): void {
    if (buffer === this.#scratch) {
      this.push(buffer, bytes);
      return;
    }
    // In place: the read went into the frame, and could not pass its end.
    this.#filled += bytes;
    if (this.#filled === this.#total) this.#end();
  }

  /** The first `length` bytes of `read`, copied out of it. */
  push(read: Uint8Array, length: number): void {
    let at = 0;
    while (at < length) {
      if (this.#frame === undefined && this.#pieces === undefined) {
        while (this.#sizeBytes < FRAME_SIZE_BYTES && at < length) this.#size[this.#sizeBytes++] = read[at++]!;
        if (this.#sizeBytes < FRAME_SIZE_BYTES) return;
        this.#sizeBytes = 0;
        this.#begin(this.#size.readInt32BE(0));
        if (this.#filled === this.#total) {
          this.#end();
          continue;
        }
      }
      const take = Math.min(this.#total - this.#filled, length - at);
      if (this.#frame !== undefined) this.#frame.set(read.subarray(at, at + take), this.#filled);
      else this.#pieces!.push(Buffer.from(read.subarray(at, at + take)));
      this.#filled += take;
      at += take;
      if (this.#filled === this.#total) this.#end();
    }
  }

  #begin(size: number): void {
    // A negative size is no frame: kafkajs gets its 4 bytes alone and fails on them as before.
    this.#total = FRAME_SIZE_BYTES + Math.max(size, 0);
    this.#filled = FRAME_SIZE_BYTES;
    if (this.#total > this.#maxAhead) {
      this.#pieces = [Buffer.from(this.#size)];
    } else {
      this.#frame = Buffer.allocUnsafe(this.#total);
      this.#size.copy(this.#frame, 0);
    }
  }

  #end(): void {
    const frame = this.#frame ?? Buffer.concat(this.#pieces!, this.#total);
    this.#frame = undefined;
    this.#pieces = undefined;
    this.#emit(frame);
  }
}
