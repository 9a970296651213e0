import { KafkaJSGroupCoordinatorNotFound } from 'kafkajs';

/**
 * A consumer crash kafkajs will not restart from whose cause is the cluster being out of
 * reach. kafkajs restarts its consumer by itself when the innermost cause of a crash is
 * retriable (a refused or closed connection, a timeout, a coordinator moving); the one
 * such cause that is not is KafkaJSGroupCoordinatorNotFound, which a coordinator lookup
 * ends in when no broker answered it, as while every broker of the cluster restarts.
 * kafkajs's broker pool swallows each broker's error there, so the same error also ends a
 * lookup the brokers refused (the group not authorized): the text says both. Read from
 * the innermost cause, as kafkajs reads it; any other crash gives undefined.
 */
export function brokerUnavailableOf(error: unknown): string | undefined {
  let innermost: unknown = error;
  for (let depth = 0; innermost instanceof Error && innermost.cause !== undefined && depth < 8; depth++)
    innermost = innermost.cause;
  if (innermost instanceof KafkaJSGroupCoordinatorNotFound)
    return 'no broker named the group coordinator: the cluster is out of reach (or refuses this group: check its ACLs)';
  return undefined;
}
