import {
  KafkaJSBrokerNotFound,
  KafkaJSConnectionError,
  KafkaJSGroupCoordinatorNotFound,
  KafkaJSRequestTimeoutError,
} from 'kafkajs';

/** Node's socket errors of a broker that is down, restarting or out of reach. */
const NETWORK_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

/**
 * A consumer crash whose cause is the cluster being out of reach, not this replica or
 * its data: every broker down (a restart of a single-broker cluster), none able to name
 * the group coordinator, a request timing out. kafkajs restarts its consumer after a
 * crash only when the innermost cause is retriable, and a coordinator lookup that found
 * no broker ends in KafkaJSGroupCoordinatorNotFound, which is not: without this the
 * consumer stays stopped once the brokers are back. Returns what happened, in an
 * operator's words, or undefined for any other crash.
 */
export function brokerUnavailableOf(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 6; e = e.cause, depth++) {
    if (e instanceof KafkaJSGroupCoordinatorNotFound)
      return `no broker could name the group coordinator (${e.message})`;
    if (e instanceof KafkaJSBrokerNotFound) return `a broker left the cluster's metadata (${e.message})`;
    if (e instanceof KafkaJSConnectionError) return `a broker connection failed (${e.message})`;
    if (e instanceof KafkaJSRequestTimeoutError) return `a broker request timed out (${e.message})`;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && NETWORK_CODES.has(code)) return `a socket failed (${code})`;
  }
  return undefined;
}
