/** The public surface: consumer definitions, and a replica for embedding. */
// First: kafkajs's consumer takes its Batch class when kafkajs loads (consumer-batch.ts).
import './kafka/protocol/consumer-batch';
export {
  defineConsumer,
  type ConsumerDefinitionInput,
  type SourceRecord,
  type Row,
  type Transform,
  type Route,
  type RouteRecord,
} from './config';
export { Replica, type ReplicaOptions } from './replica/replica';
