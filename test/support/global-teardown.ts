import { kafkaLocal } from './kafka-local';

export default function globalTeardown(): void {
  if (process.env.KAFKA_LANCE_TEST_BROKER_STARTED !== '1') return;
  const stopped = kafkaLocal('stop');
  console.log(`jest: ${stopped.output}`);
}
