import { KafkaJSGroupCoordinatorNotFound } from 'kafkajs';

/** A consumer crash the replica starts its consumer again from, with what caused it. */
export interface RestartableCrash {
  /**
   * `retriable_error`: what kafkajs itself would restart from (it is told not to, so that
   * every start of the consumer is the replica's: consumer-restart.ts).
   * `broker_unavailable`: a coordinator lookup that no broker answered.
   */
  readonly reason: 'retriable_error' | 'broker_unavailable';
  /** The innermost cause, in an operator's words. */
  readonly cause: string;
}

/**
 * Reads a consumer crash as kafkajs's own crash handler does (consumer/index.js: a crash
 * is restarted when it is KafkaJSNumberOfRetriesExceeded or its innermost cause is
 * retriable), plus the one non-retriable cause that is the cluster being out of reach:
 * KafkaJSGroupCoordinatorNotFound, which a coordinator lookup ends in when no broker
 * answered it, as while every broker restarts. kafkajs's broker pool swallows each
 * broker's error there, so the same error also ends a lookup the brokers refused (the
 * group not authorized): the text says both. Any other crash gives undefined.
 */
export function restartableCrashOf(error: unknown): RestartableCrash | undefined {
  let innermost: unknown = error;
  for (let depth = 0; innermost instanceof Error && innermost.cause !== undefined && depth < 8; depth++)
    innermost = innermost.cause;
  if (innermost instanceof KafkaJSGroupCoordinatorNotFound)
    return {
      reason: 'broker_unavailable',
      cause:
        'no broker named the group coordinator: the cluster is out of reach (or refuses this group: check its ACLs)',
    };
  const retriesExceeded = error instanceof Error && error.name === 'KafkaJSNumberOfRetriesExceeded';
  const retriable = (innermost as { retriable?: unknown } | undefined)?.retriable === true;
  if (!retriesExceeded && !retriable) return undefined;
  const named = innermost instanceof Error ? `${innermost.name}: ${innermost.message}` : String(innermost);
  return { reason: 'retriable_error', cause: named };
}
