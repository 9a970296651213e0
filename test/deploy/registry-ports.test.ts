import {
  DEMO_SCHEMA_REGISTRY_PORT,
  OUTAGE_SCHEMA_REGISTRY_PORT,
  SCRIPT_SCHEMA_REGISTRY_PORT,
  TEST_SCHEMA_REGISTRY_PORT,
} from '../support/schema-registry-local';

/**
 * The hazard: suites run in parallel, and one that resets its registry stops whatever
 * runs on its port. The script suite and the Avro demo's test once shared one: the reset
 * killed the demo's registry a second into its start.
 */
test('every registry of the test run has ports (HTTP and management, +10) of its own', () => {
  const registries = [
    TEST_SCHEMA_REGISTRY_PORT,
    OUTAGE_SCHEMA_REGISTRY_PORT,
    SCRIPT_SCHEMA_REGISTRY_PORT,
    DEMO_SCHEMA_REGISTRY_PORT,
  ];
  const ports = registries.flatMap((port) => [port, port + 10]);
  expect(new Set(ports).size).toBe(ports.length);
});
