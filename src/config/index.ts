export {
  defineConsumer,
  consumerDefinitionSchema,
  FIELD_TYPES,
  COMPOSITE_TYPES,
  VECTOR_ELEMENTS,
  EPOCH_UNITS,
  type EpochUnit,
  type VectorElement,
  type DeclaredType,
  type DeclaredField,
  type NamedField,
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
  declaredField,
  brokersFromEnv,
  type ResolvedConsumer,
  type ResolvedField,
  type ConsumerOverrides,
} from './resolve';
export { loadConsumer } from './load';
