import { defineConsumer } from 'kafka-lance';

/**
 * Documents with their embeddings, one Lance table `documents`, searchable by nearest
 * neighbour while they stream in. Typical record (the embedding has 384 numbers, the size
 * of all-MiniLM-L6-v2's; a JSON array or base64 of 1,536 little-endian float32 bytes):
 *   {"id":42,"topic":"kafka","title":"kafka note 42","body":"...",
 *    "created_at":"2026-12-02T09:00:00.000Z","embedding":[0.0132,-0.0871,...]}
 *
 * The replica that compacts builds the IVF_PQ index once the table holds 2,048 documents
 * (256 per partition) and folds new documents into it every 5 s; `kafka-lance demo
 * --vectors` streams synthetic ones through it.
 */
export default defineConsumer({
  name: 'documents',
  topics: ['documents'],
  table: 'documents',
  format: 'json',
  schema: {
    fields: {
      id: { type: 'int64', nullable: false },
      topic: { type: 'string', nullable: false },
      title: 'string',
      body: 'string',
      created_at: 'timestamp',
      embedding: { type: 'vector', dim: 384, nullable: false },
    },
  },
  indexes: [
    // 384 / 48 = 8 dimensions per PQ sub-vector; cosine, as sentence embeddings are compared.
    { column: 'embedding', type: 'ivf_pq', metric: 'cosine', numPartitions: 8, numSubVectors: 48 },
    { column: 'topic', type: 'bitmap' },
  ],
  deadLetter: { topic: 'documents.dlq' },
  durabilityIntervalMs: 1000,
  staging: { maxPartBytes: 64 * 1024 * 1024, maxPartAgeMs: 2_000 },
  materializer: { indexEveryMs: 5_000 },
});
