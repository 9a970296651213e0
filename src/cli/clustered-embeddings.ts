/**
 * Synthetic embeddings with the shape real ones have (points gathered around topics,
 * not uniform noise), without a model download: `clusters` random unit centroids, and
 * each point a centroid plus Gaussian noise, normalized. Seeded, so a demo or a test
 * produces the same vectors every run.
 */
export interface ClusteredEmbeddings {
  /** The next point and the cluster it was drawn around. */
  next(): { readonly vector: number[]; readonly cluster: number };
  /** A point near `cluster` that was not produced (a query). */
  near(cluster: number): number[];
  readonly clusters: number;
}

export function clusteredEmbeddings(options: {
  readonly dim: number;
  readonly clusters: number;
  readonly seed?: number;
  /** Standard deviation of the noise per dimension, relative to a unit centroid. */
  readonly spread?: number;
}): ClusteredEmbeddings {
  const random = mulberry32(options.seed ?? 42);
  const gaussian = () => {
    // Box–Muller: two uniforms → one standard normal.
    const u = Math.max(random(), Number.EPSILON);
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
  };
  const spread = options.spread ?? 0.3 / Math.sqrt(options.dim);
  const centroids = Array.from({ length: options.clusters }, () =>
    normalized(Array.from({ length: options.dim }, gaussian)),
  );
  const around = (cluster: number) => normalized(centroids[cluster]!.map((c) => c + spread * gaussian()));
  return {
    clusters: options.clusters,
    next() {
      const cluster = Math.floor(random() * options.clusters);
      return { vector: around(cluster), cluster };
    },
    near: around,
  };
}

function normalized(v: number[]): number[] {
  const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0)) || 1;
  // Rounded to float32, as the table stores them: brute force then sees the stored values.
  return v.map((x) => Math.fround(x / norm));
}

/** A small, fast, seedable PRNG (uniform in [0, 1)). */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
