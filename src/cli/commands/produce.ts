import { type Command, Option } from 'commander';
import { brokersFromEnv } from '../../config';
import { COMPRESSION_NAMES, type CompressionName } from '../../kafka/protocol/compression/codec';
import { brokerList, nonNegativeInt, positiveInt, ratio } from './options';

interface ProduceCommandOptions {
  topic: string;
  count: number;
  rate: number;
  recordBytes: number;
  badRatio: number;
  partitions: number;
  compression: CompressionName;
  brokers?: string[];
}

/** `kafka-lance produce`: the load generator. */
export function addProduceCommand(program: Command): void {
  program
    .command('produce')
    .description(
      'Load generator: write realistic JSON log records (the app-logs shape) to a topic, a share of them undecodable on purpose; creates the topic when it is missing.',
    )
    .requiredOption('-t, --topic <name>', 'topic to write to')
    .addOption(new Option('--count <n>', 'records to write').argParser(positiveInt).default(10_000))
    .addOption(
      new Option('--rate <n>', 'records per second; 0 = as fast as possible')
        .argParser(nonNegativeInt)
        .default(0),
    )
    .addOption(
      new Option(
        '--record-bytes <n>',
        'approximate size of a record in bytes (the message is padded); 0 = natural (~250)',
      )
        .argParser(nonNegativeInt)
        .default(0),
    )
    .addOption(
      new Option('--bad-ratio <r>', 'share of records that are not JSON (dead letters), 0 to 1')
        .argParser(ratio)
        .default(0),
    )
    .addOption(
      new Option('--partitions <n>', 'partitions of the topic when it is created')
        .argParser(positiveInt)
        .default(6),
    )
    .addOption(
      new Option('--compression <codec>', 'codec of the record batches written (compression.type)')
        .choices(COMPRESSION_NAMES)
        .default('none'),
    )
    .addOption(
      new Option(
        '--brokers <list>',
        'comma-separated bootstrap brokers (default: KAFKA_BOOTSTRAP_SERVERS, KAFKA_BROKERS, else the local broker 127.0.0.1:9092)',
      ).argParser(brokerList),
    )
    .addHelpText(
      'after',
      `
Example:
  kafka-lance produce --topic app-logs --count 100000 --rate 5000 --record-bytes 512 --bad-ratio 0.01 --partitions 6 --compression lz4`,
    )
    .action(async (opts: ProduceCommandOptions) => {
      const { produce } = await import('../produce');
      const brokers = opts.brokers ??
        brokersFromEnv() ?? [`127.0.0.1:${process.env.KAFKA_LOCAL_PORT ?? 9092}`];
      const result = await produce({
        brokers,
        topic: opts.topic,
        count: opts.count,
        rate: opts.rate,
        recordBytes: opts.recordBytes,
        badRatio: opts.badRatio,
        partitions: opts.partitions,
        compression: opts.compression,
        progress: (line) => console.error(line),
      });
      console.log(
        `produced ${result.produced} records (${result.bad} undecodable on purpose) to ${result.topic}` +
          ` (${result.partitions} partitions${result.created ? ', created' : ''}) in ${result.seconds.toFixed(1)} s:` +
          ` ${Math.round(result.produced / Math.max(result.seconds, 0.001))} records/s,` +
          ` ${Math.round(result.bytes / Math.max(result.produced, 1))} bytes/record on average`,
      );
    });
}
