import type { FetchRequest, FetchResponse } from './fetch-request';
import { isReproducedKafkajs } from './kafkajs-modules';

/** kafkajs 2.2.4's Broker: the parts its `fetch` is made of. */
interface KafkajsBroker {
  lookupRequest: (apiKey: number, definition: unknown) => (request: object) => unknown;
}
type SendRequest = (protocolRequest: unknown) => Promise<FetchResponse>;

const SEND_REQUEST = 'private:Broker:sendRequest';

/**
 * kafkajs 2.2.4's `Broker.fetch` without its shuffle: the request goes out with its
 * topics and partitions in the order given (fetch-order.ts), the rest as kafkajs sends
 * it (its defaults, the Fetch version the broker supports, the same send and reconnect).
 * Undefined on another kafkajs release, or when the broker is not kafkajs 2.2.4's: the
 * caller then keeps kafkajs's own fetch.
 */
export function unshuffledFetch(
  broker: object,
): ((request: FetchRequest) => Promise<FetchResponse>) | undefined {
  if (!isReproducedKafkajs()) return undefined;
  let prototype: object | null = Object.getPrototypeOf(broker) as object | null;
  let send: SendRequest | undefined;
  while (prototype !== null && send === undefined) {
    const key = Object.getOwnPropertySymbols(prototype).find((s) => s.description === SEND_REQUEST);
    if (key !== undefined) send = (prototype as Record<symbol, SendRequest | undefined>)[key];
    prototype = Object.getPrototypeOf(prototype) as object | null;
  }
  const kafkajs = broker as Partial<KafkajsBroker>;
  if (typeof send !== 'function' || typeof kafkajs.lookupRequest !== 'function') return undefined;
  const sendRequest = send;
  /* eslint-disable @typescript-eslint/no-require-imports -- kafkajs internals, pinned at 2.2.4 */
  const apiKeys = require('kafkajs/src/protocol/requests/apiKeys') as { Fetch: number };
  const { requests } = require('kafkajs/src/protocol/requests') as { requests: { Fetch: unknown } };
  /* eslint-enable @typescript-eslint/no-require-imports */
  return (request) => {
    const asked = request as FetchRequest & { replicaId?: number; isolationLevel?: number; rackId?: string };
    // Looked up at each fetch, as kafkajs does: the broker sets lookupRequest when it connects.
    const fetch = (broker as KafkajsBroker).lookupRequest(apiKeys.Fetch, requests.Fetch);
    return sendRequest.call(
      broker,
      fetch({
        replicaId: asked.replicaId,
        isolationLevel: asked.isolationLevel,
        maxWaitTime: asked.maxWaitTime ?? 5000,
        minBytes: asked.minBytes ?? 1,
        maxBytes: asked.maxBytes ?? 10485760,
        topics: asked.topics,
        rackId: asked.rackId ?? '',
      }),
    );
  };
}
