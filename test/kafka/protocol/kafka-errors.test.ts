import { KafkaJSConnectionError, KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError } from 'kafkajs';
import {
  isFlaggedRetriable,
  isGroupChange,
  isRefusedAsTooLarge,
  offsetOutOfRangeIn,
  produceFailureOf,
  rejoinRequest,
} from '../../../src/kafka/protocol/kafka-errors';
import { TopicRecreatedError } from '../../../src/kafka/protocol/topic-ids';

const protocolError = (type: string, retriable: boolean) =>
  new KafkaJSProtocolError(Object.assign(new Error(`broker says ${type}`), { type, code: 0, retriable }));
const retriesExceeded = (cause: Error) =>
  new KafkaJSNumberOfRetriesExceeded(cause, { retryCount: 5, retryTime: 1_000 });

describe('kafkajs errors, read in one place', () => {
  test('a heartbeat answer that needs a rejoin is a group change; another broker error is not', () => {
    for (const type of [
      'REBALANCE_IN_PROGRESS',
      'UNKNOWN_MEMBER_ID',
      'ILLEGAL_GENERATION',
      'NOT_COORDINATOR_FOR_GROUP',
      'NOT_COORDINATOR',
    ])
      expect(isGroupChange(protocolError(type, true))).toBe(true);
    expect(isGroupChange(protocolError('REQUEST_TIMED_OUT', true))).toBe(false);
    expect(isGroupChange(new Error('no type'))).toBe(false);
    expect(isGroupChange(null)).toBe(false);
  });

  test('what the ingestion throws to rejoin reads as a group change: a claim that cannot land, a recreated topic', () => {
    const stuck = rejoinRequest('the assignment could not be claimed within sessionTimeoutMs; rejoining');
    expect(isGroupChange(stuck)).toBe(true);
    expect(isFlaggedRetriable(stuck)).toBe(true);
    expect(isGroupChange(new TopicRecreatedError('t', 'old', 'new'))).toBe(true);
  });

  test('an out-of-range fetch names its partition; any other error names none', () => {
    const outOfRange = Object.assign(new Error('out of range'), {
      name: 'KafkaJSOffsetOutOfRange',
      topic: 't',
      partition: 3,
    });
    expect(offsetOutOfRangeIn(outOfRange)).toEqual({ topic: 't', partition: 3 });
    expect(offsetOutOfRangeIn(Object.assign(new Error('x'), { topic: 't', partition: 3 }))).toBeUndefined();
    expect(offsetOutOfRangeIn(undefined)).toBeUndefined();
  });

  test('only an error kafkajs flags retriable is retried while a topic is being created', () => {
    expect(isFlaggedRetriable(protocolError('LEADER_NOT_AVAILABLE', true))).toBe(true);
    expect(isFlaggedRetriable(protocolError('TOPIC_AUTHORIZATION_FAILED', false))).toBe(false);
    expect(isFlaggedRetriable(new Error('plain'))).toBe(false);
  });

  test('a produce refused for its size, even wrapped by kafkajs retries, may pass smaller', () => {
    expect(isRefusedAsTooLarge(protocolError('MESSAGE_TOO_LARGE', false))).toBe(true);
    expect(isRefusedAsTooLarge(retriesExceeded(protocolError('RECORD_LIST_TOO_LARGE', false)))).toBe(true);
    expect(isRefusedAsTooLarge(protocolError('NOT_LEADER_FOR_PARTITION', true))).toBe(false);
  });

  test('a produce failure is permanent for answers no retry changes, and transient (retriable or not) otherwise', () => {
    expect(produceFailureOf(retriesExceeded(protocolError('UNKNOWN_TOPIC_OR_PARTITION', true)))).toEqual({
      kind: 'permanent',
      type: 'UNKNOWN_TOPIC_OR_PARTITION',
      message: 'broker says UNKNOWN_TOPIC_OR_PARTITION',
    });
    expect(produceFailureOf(retriesExceeded(new KafkaJSConnectionError('gone')))).toEqual({
      kind: 'transient',
      retriable: true,
    });
    expect(produceFailureOf(protocolError('CORRUPT_MESSAGE', false))).toEqual({
      kind: 'transient',
      retriable: false,
    });
    expect(produceFailureOf(new Error('not kafkajs'))).toEqual({ kind: 'transient', retriable: true });
  });
});
