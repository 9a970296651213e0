/**
 * The rows of the table of consumer-definition options (docs/configuration.md): what
 * each option means. Paths, types, ranges and defaults come from the zod schema itself
 * (options-table-generator.ts renders the table). test/docs/options-table.test.ts
 * fails when the schema gains an option that has no text here, or when a text names
 * an option the schema no longer has.
 *
 * Rewrite the table: `npm run build && node scripts/options-table.js`.
 */

/** What the README says about one option. */
export interface OptionText {
  /** Meaning, as Markdown (a `|` is escaped when rendered). */
  readonly meaning: string;
  /** A default computed outside the schema (from other options, the environment or the replica). */
  readonly computedDefault?: string;
}

/**
 * One entry per option path; `<name>` stands for a key the user chooses. Texts come
 * from the JSDoc of the schema (consumer-definition.ts and its sections) where it has some, otherwise from the code
 * that reads the option (cited where it is not obvious).
 */
export const OPTION_TEXTS: Readonly<Record<string, OptionText>> = {
  name: {
    meaning:
      'Names the consumer: the default `groupId` and `table`, the dead-letter file names and the connector name in dead-letter headers. Letters, digits, `_` and `-`, starting with a letter, at most 128.',
  },
  brokers: {
    meaning:
      'Bootstrap brokers (`host:port`). `KAFKA_BOOTSTRAP_SERVERS` (comma-separated; alias `KAFKA_BROKERS`) overrides it and `--brokers` overrides both; one of the three must be set.',
  },
  groupId: {
    meaning: 'Kafka consumer group. All replicas of a consumer share it.',
    computedDefault: '`kafka-lance-<name>`',
  },
  topics: {
    meaning:
      'Topics to consume: names, and patterns `{ pattern: "^orders\\\\..+$" }` (a JavaScript regular expression, unanchored: write `^...$` to match whole names). Set exactly one of `topics` and `topicsRegex`. Each named topic must exist when a replica starts; a pattern may match none yet. A topic created later that matches is consumed from its earliest offset within `topicRefreshMs` (docs/routing.md).',
  },
  'topics[].pattern': {
    meaning: 'A regular expression over topic names (see `topics`).',
  },
  topicsRegex: {
    meaning: "One pattern, the same as `topics: [{ pattern }]` (Kafka Connect's `topics.regex`).",
  },
  topicRefreshMs: {
    meaning:
      "With patterns: how often the broker's topic list is read again. A new matching topic is consumed, and a deleted one let go, within this long; either restarts the group's consumer on this replica (a rebalance).",
  },
  fromBeginning: {
    meaning:
      "Where a partition without a committed offset starts: its earliest offset (`true`) or its log end (`false`). For a topic a pattern matches, at the group's first start only: later, one without commits starts from its earliest offset ([routing](routing.md)).",
  },
  format: {
    meaning:
      '`json`: each value is a UTF-8 JSON object, one row. `raw`: the bytes become binary `key` and `value` columns (`schema: "infer"`), or go to `transform` as they are, whose rows a declared schema may type (a `binary` field takes bytes as they are). `avro`, `protobuf`, `json-schema`: Avro, Protobuf or JSON Schema values in the Confluent wire format (magic byte 0, 4-byte schema id, for Protobuf the message-index list, payload), writer schemas from `schemaRegistry`; the columns follow the writer schemas (`schema: "infer"`, no `transform`; README "Schema Registry").',
  },
  'schemaRegistry.url': {
    meaning:
      "`format` or `keyFormat` `avro`, `protobuf`, `json-schema`: the Confluent-compatible Schema Registry the writer schemas are fetched from by id (Confluent's `schema.registry.url`): its API base, `http://` or `https://` (Apicurio: `.../apis/ccompat/v7`). A registry that cannot be reached holds the records back (retried; `kafka_lance_schema_registry_unreachable`), never dead-letters them.",
  },
  'schemaRegistry.basicAuth.username': {
    meaning: "HTTP basic authentication: the user (before the `:` of Confluent's `basic.auth.user.info`).",
  },
  'schemaRegistry.basicAuth.password': { meaning: 'The password; never logged.' },
  'schemaRegistry.ssl': {
    meaning:
      '`https://` only: `true` (the system CAs), or PEM texts `ca`, `cert`, `key` and `rejectUnauthorized`.',
  },
  'schemaRegistry.ssl.ca': { meaning: 'PEM of the CA(s) to trust.' },
  'schemaRegistry.ssl.cert': { meaning: 'PEM client certificate (mutual TLS).' },
  'schemaRegistry.ssl.key': { meaning: 'PEM private key of `cert`.' },
  'schemaRegistry.ssl.rejectUnauthorized': {
    meaning: '`false` accepts any server certificate (tests only).',
  },
  'schemaRegistry.cacheTtlMs': {
    meaning:
      'A schema fetched by id is kept this long, then fetched again (kept as it is when the registry cannot be reached); an id the registry did not know is asked again after this long too. At most 1,000 schemas and 64 MiB of their text are kept (least recently used go first), and apart from them at most 10,000 ids the registry did not know.',
  },
  'schemaRegistry.requestTimeoutMs': {
    meaning:
      'One registry request fails after this long and is retried (the registry counts as unreachable).',
  },
  table: {
    meaning:
      'Lance table name (same characters as `name`), or a template holding `{topic}` (for example `"cdc_{topic}"`): a table per topic, the topic inserted as it is except a leading `.` or `-` which becomes `_`. With `route`, the table of records the route names none for. A name a template makes that is not a valid table name (docs/routing.md) makes its records dead letters (`invalid-table`). A template or a route needs `offsets.commitAfter: "staged"`.',
    computedDefault: '`<name>`',
  },
  dataDir: {
    meaning:
      "This replica's directory: staging parts, publication ledger, file dead letters, its lock, and the Lance table unless `lance.uri` is set. `KAFKA_LANCE_DATA_DIR` overrides it, `--data-dir` overrides both. One replica per directory.",
    computedDefault: '`./data`',
  },
  schema: {
    meaning:
      '`"infer"`: a column per JSON key as keys appear (number: float64, string: string, boolean: boolean, object or array: json; nullable; a null creates no column). Or `{ fields }`: declared columns; other keys are ignored.',
  },
  'schema.fields': {
    meaning:
      'Declared columns by name. Names starting with `_` are reserved; names Lance cannot take (containing `.`, for one) are refused.',
  },
  'schema.fields.<name>': {
    meaning:
      'A type name (nullable), or an object with `type` and its parameters. The types, what JSON each accepts and the Arrow type it is stored as are in the table of column types below.',
  },
  'schema.fields.<name>.type': {
    meaning:
      'The column type: a type name, or `vector`, `decimal`, `list`, `struct` (which take the parameters below).',
  },
  'schema.fields.<name>.nullable': {
    meaning:
      '`false`: a record without a value for this field is a dead letter (`schema-mismatch`). Inside a struct or a list, the same for a struct field or a list item.',
  },
  'schema.fields.<name>.epochUnit': {
    meaning: "The unit of this timestamp field's numbers.",
    computedDefault: 'its `unit`, else `epochUnit`',
  },
  'schema.fields.<name>.unit': {
    meaning:
      "A timestamp's stored unit (Arrow `Timestamp(unit)`): `us` keeps the microseconds of Kafka Connect and Debezium times. Strings keep their digits down to it.",
    computedDefault: '`"ms"`',
  },
  'schema.fields.<name>.timezone': {
    meaning:
      "A timestamp's stored zone (an IANA name or `±hh:mm`), Arrow metadata for readers: values are UTC instants either way.",
  },
  'schema.fields.<name>.dim': {
    meaning: '`vector`: its dimension. A value of another length is a dead letter naming both.',
  },
  'schema.fields.<name>.element': {
    meaning:
      '`vector`: its element type. Int8 is not offered: LanceDB 0.39 stores it but no query can search it.',
  },
  'schema.fields.<name>.precision': {
    meaning: '`decimal`: total digits (Decimal128). A value with more is a dead letter.',
  },
  'schema.fields.<name>.scale': {
    meaning:
      '`decimal`: digits after the point, at most `precision`. A value with more (other than trailing zeros) is a dead letter, never rounded.',
  },
  'schema.fields.<name>.items': {
    meaning: '`list`: the type of its items, written like a field (nested to any depth).',
  },
  'schema.fields.<name>.fields': {
    meaning: '`struct`: its fields by name, each written like a field (nested to any depth).',
  },
  eventTimeField: {
    meaning:
      'A field whose time keys staging parts by minute instead of the arrival time. A record whose value there is not a time is a dead letter (`invalid-event-time`).',
  },
  maxInferredColumns: {
    meaning:
      '`schema: "infer"` and the registry formats: at most this many data columns; a record that would add more (a key, or a writer schema with new fields) is a dead letter (`too-many-columns`). Keep map-like objects under one key (a json column). The cap counts top-level columns; nested struct fields are bounded apart: the registry formats\' columns hold at most 10,000 fields in all, nested ones included, and a writer schema that would go beyond is `too-many-columns` too.',
  },
  epochUnit: {
    meaning:
      'The unit of numeric timestamps (declared `timestamp` fields and `eventTimeField`): epoch seconds, milliseconds, microseconds or nanoseconds. Strings are RFC 3339 / ISO 8601; without a zone, UTC.',
  },
  includeKey: { meaning: 'Add the Kafka key as a `_key` column, read as `keyFormat` says.' },
  keyFormat: {
    meaning:
      "With `includeKey`, how the key becomes `_key` (Kafka Connect's `key.converter` beside `format`, the value's): `binary`, its bytes; `string`, UTF-8 text; `avro`, `protobuf`, `json-schema`, a key in the Confluent wire format, a struct of its writer schema's columns (README \"Schema Registry\").",
  },
  transform: {
    meaning:
      '`(record) => row | rows | null` (in `.ts`/`.js` definitions): turns a record (`topic`, `partition`, `offset`, `timestamp`, `key`, `value`) into zero, one or more rows, and adds a `_row` column. A throw is a dead letter (`transform-failed`).',
  },
  route: {
    meaning:
      '`(record) => table | undefined` (in `.ts`/`.js` definitions): the table of each record, decided before it is decoded; it sees `topic`, `partition`, `offset`, `timestamp` and the raw `key` and `value` bytes. `undefined` sends the record to `table`. A throw, or a name that is not a valid table name, makes the record a dead letter (`invalid-table`).',
  },
  maxRecordBytes: {
    meaning: 'A record whose key and value together are larger is a dead letter (`too-large`).',
  },
  tombstones: {
    meaning:
      'What a null value (tombstone) is: a dead letter (`tombstone`), nothing to stage (`ignore`), or the delete of its key (`delete`: mode `upsert` with key `record-key`, or envelope `debezium` reading the key from the record key).',
    computedDefault:
      '`delete` in mode `upsert` with key `record-key` or envelope `debezium`, else `dead-letter`',
  },
  mode: {
    meaning:
      "`append`: every record is a row. `upsert`: one row per key, the newest record's value in Kafka's order; deletes are `_deleted` rows readers filter (docs/upserts-and-cdc.md).",
  },
  envelope: {
    meaning:
      "`debezium`: each value is a Debezium change event, JSON (with or without `schemas.enable`) or Avro through the Schema Registry (format `avro`, keyFormat `avro`: the columns are the envelope's `after` record's): `c`/`r`/`u` upsert `after`, `d` deletes the key (from `before` or the record key), and so does a tombstone (its key from the record key: on a compacted topic it may be all that is left of the delete); a truncate does what `truncate` says; the TOASTed placeholder of a string column keeps the stored value (in another column it is a dead letter). Needs mode `upsert` with key fields (docs/upserts-and-cdc.md).",
  },
  truncate: {
    meaning:
      "Envelope `debezium`: what a truncate event (`op: t`, sent when the connector's `skipped.operations` lets it through) does: `dead-letter` (default) sets it aside (`debezium-truncate`) and keeps the rows; `apply` deletes every row of its topic written before it, in one commit, for a definition naming exactly one topic of one partition (checked at start).",
    computedDefault: '`dead-letter`',
  },
  sequence: {
    meaning:
      "Envelope `debezium`: `source.lsn` (the only value) orders a key's records by PostgreSQL's log position before their Kafka position, across partitions and topics too. Kept per row in the column `_sequence`; a row without one (a tombstone) is ordered by its Kafka position.",
  },
  'key.fields': {
    meaning:
      'Declared fields (1 to 8; string, integer, date, timestamp, boolean or binary) whose values together are the key; each becomes non-nullable, a record without one is a dead letter.',
  },
  key: {
    meaning:
      'Mode `upsert`: the key of a row, `record-key` (the Kafka key, read into `_key` by `keyFormat` `string` or `binary`) or `{ fields: [...] }` (declared fields, compared by value and type).',
  },
  deadLetter: {
    meaning: 'Where records that cannot be staged go: `{ topic }` or `{ file }`.',
    computedDefault: 'file `<dataDir>/dead-letter/<name>.jsonl`',
  },
  'deadLetter.topic': {
    meaning:
      'A Kafka topic, written with `acks: -1` before the offsets are committed. Create it first: it is never auto-created.',
  },
  'deadLetter.contextHeaders': {
    meaning:
      "Add Kafka Connect's `__connect.errors.*` headers (Connect's `errors.deadletterqueue.context.headers.enable`).",
  },
  'deadLetter.compression': {
    meaning:
      "The codec of the dead letters' record batches (the Java producer's `compression.type`): `none`, `gzip`, `snappy`, `lz4` or `zstd`.",
  },
  'deadLetter.file': {
    meaning: 'A JSON-lines file (relative to the working directory), fsynced on every write.',
  },
  'errors.tolerance': {
    meaning:
      "Connect's `errors.tolerance`. `ratio`: dead-letter bad records, but stop a partition when more than `maxDeadLetterRatio` of its last `window` records were dead letters. `all`: dead-letter and go on. `none`: stop a partition at its first bad record.",
  },
  'errors.maxDeadLetterRatio': {
    meaning: 'With `ratio`: the share of dead letters (below 1) above which a partition stops.',
  },
  'errors.window': {
    meaning:
      "With `ratio`: how many of a partition's most recent records the share is measured over. A window not yet full (a partition's first records since start, a quiet partition) is judged too, from its 100th record (or `window`'s, when smaller), and before that replica-wide: the records of every partition whose window has not reached that point share one window of this size.",
  },
  'errors.retryTimeoutMs': {
    meaning:
      "How long a dead-letter write failing with a transient error is retried (Connect's `errors.retry.timeout`) before its partition stops. Errors no retry can fix (too large, no such topic) stop it at once.",
  },
  'errors.retryDelayMaxMs': {
    meaning: "The longest wait between two retries (Connect's `errors.retry.delay.max.ms`).",
  },
  durabilityIntervalMs: {
    meaning:
      'The durability tick: open staging parts are written and fsynced this often, and the offsets they hold are committed after it.',
  },
  'offsets.commitAfter': {
    meaning:
      'When an offset is committed: `staged` once the records below it are fsynced in staging, `published` once their Lance publication is durable (a lost data directory then loses nothing; publications insert-if-absent, cost grows with the table: DESIGN.md). Needs the same value on every replica.',
  },
  'queue.maxRecords': {
    meaning: 'Records between the Kafka consumer and the staging workers; when full, fetching waits.',
  },
  'queue.maxBytes': {
    meaning:
      'Bytes between the Kafka consumer and the staging workers, likewise. A fetch asks for up to this much, and as much per partition.',
  },
  'staging.maxPartBytes': { meaning: 'A staging part is sealed (ready to publish) at this size.' },
  'staging.maxPartAgeMs': {
    meaning: "A staging part is sealed at this age (like Connect's `rotate.schedule.interval.ms`).",
  },
  'staging.maxOpenParts': {
    meaning:
      'Part files open at once in a replica, over all its tables when records are routed: each of its W staging lanes gets this / W (at least 1). Event time opens one part per minute; past the bound the oldest part is sealed.',
  },
  'staging.maxTables': {
    meaning:
      'Tables one staging lane of a routing consumer (`table` template or `route`) stages: a record naming a new table beyond them is a dead letter (`invalid-table`, "too many tables").',
  },
  workers: {
    meaning:
      'Staging worker threads; each partition is staged by one of them. `0` decodes and stages on the main thread (no thread, no copy of each batch into it).',
    computedDefault: '`0` with 2 CPU cores or fewer, else `2`',
  },
  'lance.uri': {
    meaning:
      'Where the Lance table lives: a directory, or `s3://`, `s3+ddb://bucket/prefix?ddbTableName=T` (commits claimed in a DynamoDB table), `gs://`, `az://` with `storageOptions`.',
    computedDefault: '`<dataDir>/lance`',
  },
  'lance.storageOptions': {
    meaning:
      'Object-store options passed to LanceDB (`region`, `endpoint`, `allow_http`, credentials; `AWS_*` variables work too). Each value is a `secret` (docs/security.md); none is ever logged.',
  },
  'lance.commits': {
    meaning:
      "Whether concurrent Lance commits on the store are atomic: `probe` races concurrent appends at start, `atomic` trusts the operator. Several replicas writing one table need atomic commits (DESIGN.md, 'Object storage').",
  },
  'lance.singleWriter': {
    meaning:
      'Declares this replica the table\u2019s only writer: it then publishes on a store without atomic commits (s3proxy 2, S3 API servers that ignore `If-None-Match`), where it otherwise refuses to start. No other replica or `kafka-lance compact` may write the table meanwhile.',
  },
  'lance.connectTimeoutMs': {
    meaning:
      'The start check of an object store (connect and list) fails after this long, naming the field at fault.',
  },
  'materializer.enabled': { meaning: 'Publish into Lance (`false`: stage and commit only).' },
  'materializer.pipelinePreparation': {
    meaning:
      '`false`: buffered (prepare a whole publication, then write it); `true`: streamed (prepare the next while one writes).',
  },
  'materializer.maxPublicationBytes': {
    meaning: 'Staged bytes in one publication (one Lance commit) at most.',
  },
  'materializer.maxPublicationDelayMs': {
    meaning: 'A small publication waits at most this long for more parts (freshness bound).',
  },
  'materializer.fetchPermits': {
    meaning: 'Staging parts read at once, shared by all publications of a replica.',
  },
  'materializer.decodePermits': { meaning: 'Staging parts decoded at once, likewise.' },
  'materializer.sourceReservationBytes': {
    meaning:
      'Bytes of fetched and decoded source data in flight. A publication holds twice its bytes until its Lance add ends, so this must be at least 2 x `maxPublicationBytes` and 2 x `staging.maxPartBytes`.',
  },
  'materializer.pollMs': { meaning: 'How often the materializer looks for sealed parts to publish.' },
  'materializer.optimizeEveryMs': {
    meaning:
      'Compact small fragments (LanceDB optimize) this often; `0` turns it off. Only the replica that owns the first partition of the first topic runs it, between its publications.',
  },
  'materializer.cleanupOlderThanMs': {
    meaning:
      'Each compaction also removes the table versions that stopped being the latest this long ago, and the files only they use; `0` keeps every version (LanceDB would keep 7 days). At least 60000: a query reading a removed version fails.',
  },
  'materializer.indexEveryMs': {
    meaning:
      'Build and update the declared `indexes` this often, in the background (publications go on meanwhile); `0` turns it off. The replica that compacts does it, on a store with atomic commits.',
  },
  'metrics.maxTableLabels': {
    meaning:
      'Distinct tables named in the `table` label of every per-table metric; the metrics of later tables are reported as `table="_other"`, with one warning (docs/routing.md).',
  },
  indexes: {
    meaning:
      'Lance indexes on declared columns, built once the table can train them and kept fresh by the replica that compacts (README, "Vectors and indexes"). Checked at start against the declared fields: a vector index on a float vector, a scalar index on a column it can index, one index per column.',
  },
  'indexes[].column': { meaning: 'The declared field the index covers.' },
  'indexes[].type': {
    meaning:
      'LanceDB index: `ivf_pq`, `ivf_hnsw_sq`, `ivf_flat` (vector columns); `btree` (scalars with many distinct values), `bitmap` (few distinct values), `label_list` (lists), `fts` (full-text search on strings).',
  },
  'indexes[].name': { meaning: 'The index name in Lance.', computedDefault: '`<column>_idx`' },
  'indexes[].metric': {
    meaning: 'Vector indexes: the distance the index is trained for; queries must use the same one.',
  },
  'indexes[].numPartitions': {
    meaning: 'Vector indexes: IVF partitions (LanceDB picks about the square root of the rows when absent).',
  },
  'indexes[].numSubVectors': {
    meaning: '`ivf_pq`: PQ sub-vectors; must divide the dimension (LanceDB: dimension / 16, else / 8).',
  },
  'indexes[].numBits': { meaning: '`ivf_pq`: bits per sub-vector code (LanceDB default 8).' },
  'indexes[].m': { meaning: '`ivf_hnsw_sq`: HNSW neighbours per node (LanceDB default 20).' },
  'indexes[].efConstruction': {
    meaning: '`ivf_hnsw_sq`: HNSW candidates while building (LanceDB default 300).',
  },
  'indexes[].minRows': {
    meaning:
      'Vector indexes: rows with a vector the table holds before the index is trained (fewer train a poor index, or none: PQ needs 256).',
    computedDefault: '256 x `numPartitions`, else 4096',
  },
  'indexes[].retrainShare': {
    meaning:
      "Vector indexes: trained again (replaced) once more than this share of the table's rows came after its last training (at most 1); smaller shares are folded in incrementally (LanceDB optimize).",
  },
  sessionTimeoutMs: {
    meaning:
      'Group session timeout: a replica that stops heartbeating (killed, hung) keeps its partitions this long before the group moves them.',
  },
  heartbeatIntervalMs: {
    meaning:
      'How often a replica heartbeats to the group coordinator; a fetch waits at most this long (and at most 5 s) for new records, as heartbeats go out between fetches.',
  },
  rebalanceTimeoutMs: {
    meaning: 'How long the coordinator waits for the members to rejoin during a rebalance.',
  },
  'client.clientId': { meaning: 'kafkajs client id.', computedDefault: '`kafka-lance-<name>`' },
  'client.ssl': {
    meaning:
      '`true` (TLS, the system CAs), or Node `tls.connect` options (kafkajs `ssl`): the named ones are checked at start, others go to node:tls as given. Never logged (docs/security.md).',
  },
  'client.ssl.ca': { meaning: "PEM of the CA(s) the brokers' certificates chain to; one or a list." },
  'client.ssl.cert': { meaning: 'PEM client certificate (mutual TLS).' },
  'client.ssl.key': { meaning: 'PEM private key of `cert`.' },
  'client.ssl.pfx': { meaning: 'PKCS#12 bundle of key and certificate (`{ file }`, read as bytes).' },
  'client.ssl.passphrase': { meaning: 'Password of an encrypted `key` or `pfx`.' },
  'client.ssl.rejectUnauthorized': { meaning: '`false` accepts any broker certificate (tests only).' },
  'client.ssl.servername': { meaning: 'TLS server name (SNI) when it differs from the broker host.' },
  'client.sasl': {
    meaning:
      'kafkajs `sasl`: `mechanism` plus its own fields. Every field is a `secret` and never logged (docs/security.md).',
  },
  'client.sasl.mechanism': { meaning: 'SASL mechanism.' },
  'client.sasl.username': { meaning: '`plain`, `scram-sha-256`, `scram-sha-512`: the user.' },
  'client.sasl.password': { meaning: '`plain`, `scram-sha-256`, `scram-sha-512`: the password.' },
  'client.sasl.oauthBearerProvider': {
    meaning:
      '`oauthbearer`: a function returning a promise of `{ value: token }` (.ts/.js definitions; AWS MSK IAM: docs/security.md).',
  },
  'client.sasl.authorizationIdentity': { meaning: '`aws` (kafkajs AWS-IAM): the authorization identity.' },
  'client.sasl.accessKeyId': { meaning: '`aws`: the access key id.' },
  'client.sasl.secretAccessKey': { meaning: '`aws`: the secret access key.' },
  'client.sasl.sessionToken': { meaning: '`aws`: the session token.' },
  'client.connectionTimeout': { meaning: 'kafkajs `connectionTimeout`, ms (kafkajs default 1000).' },
  'client.requestTimeout': { meaning: 'kafkajs `requestTimeout`, ms (kafkajs default 30000).' },
};
