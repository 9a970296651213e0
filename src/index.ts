/** The public surface: consumer definitions, and a replica for embedding. */
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
