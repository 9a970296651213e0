export {
  defineConsumer,
  consumerDefinitionSchema,
  type ConsumerDefinition,
  type ConsumerDefinitionInput,
} from './consumer-definition';
export {
  FIELD_TYPES,
  COMPOSITE_TYPES,
  VECTOR_ELEMENTS,
  EPOCH_UNITS,
  type EpochUnit,
  type VectorElement,
  type DeclaredType,
  type DeclaredField,
  type NamedField,
  type FieldTypeName,
} from './field-spec';
export { type SchemaRegistryOptions } from './formats';
export { type SourceRecord, type Row, type Transform } from './transform';
export { tableNameProblem, tableFromTemplate, topicForTableName } from './table-name';
export {
  TableResolver,
  tableRoutingOf,
  type TableRouting,
  type TableChoice,
  type Route,
  type RouteRecord,
} from './table-routing';
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
