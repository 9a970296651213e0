import { FRAME_SIZE_BYTES } from './framed-socket';
import { isReproducedKafkajs } from './kafkajs-modules';

/**
 * Two adjustments to how kafkajs 2.2.4's Connection (network/connection.js) keeps the bytes
 * it has read, for every client this process makes. Both leave what it decodes unchanged.
 *
 * - **A new socket starts with nothing read.** kafkajs reuses a Connection across
 *   reconnects and never clears its read state. A response cut off by the broker (a restart,
 *   a reset) left its first bytes behind, the first response on the next socket was read
 *   as their rest, and every later request on that connection timed out (reproduced
 *   with a server that cuts a response: test/kafka/protocol/connection-reads.test.ts).
 *   framed-socket.ts's reads drop a cut frame with its socket; TLS sockets read as kafkajs
 *   does. `connect` on a disconnected Connection now clears the state.
 * - **A whole frame is read in place.** After a response kafkajs keeps the rest of the
 *   read as the first chunk of the next, an empty Buffer when the read ended with the
 *   response, and joins its chunks whenever there are two: with whole frames arriving
 *   (framed-socket.ts) every response was copied once more. An empty leftover adds
 *   nothing to a join, so it is dropped before the next read is taken.
 *
 * Idempotent; does nothing with another kafkajs release.
 */
export function installConnectionReads(): boolean {
  if (!isReproducedKafkajs()) return false;
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- kafkajs internals, pinned
  const prototype = (require(CONNECTION) as { prototype: ConnectionReads & { [INSTALLED]?: true } })
    .prototype;
  if (prototype[INSTALLED]) return true;
  const { connect, processData } = prototype;
  prototype.connect = function (this: ConnectionReads) {
    if (!this.isConnected()) {
      this.chunks = [];
      this.bytesBuffered = 0;
      this.bytesNeeded = FRAME_SIZE_BYTES; // kafkajs's Decoder.int32Size(): a response's size first
    }
    return connect.call(this);
  };
  prototype.processData = function (this: ConnectionReads, rawData: Buffer) {
    if (this.chunks.length === 1 && this.chunks[0]!.length === 0) this.chunks = [];
    return processData.call(this, rawData);
  };
  prototype[INSTALLED] = true;
  return true;
}

/** What this module reaches of kafkajs 2.2.4's Connection. */
interface ConnectionReads {
  chunks: Buffer[];
  bytesBuffered: number;
  bytesNeeded: number;
  isConnected: (this: ConnectionReads) => boolean;
  connect: (this: ConnectionReads) => Promise<unknown>;
  processData: (this: ConnectionReads, rawData: Buffer) => unknown;
}

const CONNECTION = 'kafkajs/src/network/connection';
/** Marks the Connection as adjusted (a Symbol.for: one mark however often this module loads). */
const INSTALLED = Symbol.for('kafka-lance.connection-reads');
