export {
  defineConsumer,
  consumerDefinitionSchema,
  FIELD_TYPES,
  EPOCH_UNITS,
  type EpochUnit,
  type ConsumerDefinition,
  type ConsumerDefinitionInput,
  type FieldTypeName,
  type SourceRecord,
  type Row,
  type Transform,
} from './consumer-definition';
export {
  ConfigError,
  resolveConsumer,
  brokersFromEnv,
  type ResolvedConsumer,
  type ResolvedField,
  type ConsumerOverrides,
} from './resolve';
export { loadConsumer } from './load';
