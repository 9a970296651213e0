import * as http from 'node:http';
import * as https from 'node:https';
import { KafkaLanceError } from '../common/errors';
import { withoutUserInfo } from '../common/redaction';
import type { SchemaRegistryOptions } from '../config';

/** A schema's reference to another one: the name its text imports, and where the registry holds it. */
export interface SchemaReference {
  readonly name: string;
  readonly subject: string;
  readonly version: number;
}

/** What the registry holds under an id, or under a subject's version. */
export type RegistryAnswer =
  | {
      readonly found: true;
      readonly schemaType: string;
      readonly schema: string;
      readonly references: readonly SchemaReference[];
    }
  /**
   * The registry answered that it has no such schema (HTTP 404 with Confluent's error code
   * 40403 for an id; 40401 or 40402 for a subject or a version).
   */
  | { readonly found: false; readonly message: string };

/** Confluent's error codes for "no such schema" (40403), "no such subject" (40401), "no such version" (40402). */
const NOT_FOUND_BY_ID = [40403];
const NOT_FOUND_BY_VERSION = [40401, 40402];

/**
 * The registry could not answer: down, unreachable, too slow, refusing our credentials
 * or answering what is not a schema. Never bad input: the records wait for it.
 */
export class SchemaRegistryUnavailableError extends KafkaLanceError {
  /** The registry's URL without user info. */
  readonly url: string;

  constructor(
    url: string,
    readonly schemaId: number,
    why: string,
  ) {
    const shown = withoutUserInfo(url);
    super('SCHEMA_REGISTRY_UNAVAILABLE', `schema registry ${shown}: schema id ${schemaId}: ${why}`, {
      retriable: true,
      context: { url: shown, schemaId },
    });
    this.url = shown;
  }
}

/** Answers larger than this are refused (a schema is kilobytes; a wrong URL could stream anything). */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/**
 * A Confluent Schema Registry API client for the one call ingestion needs,
 * `GET /schemas/ids/{id}`, on keep-alive connections, each request bounded by
 * `requestTimeoutMs`. node:http(s) rather than fetch: its agent takes the TLS options
 * (ca, cert, key) that fetch cannot without undici's own Agent.
 */
export class SchemaRegistryClient {
  readonly #options: SchemaRegistryOptions;
  readonly #agent: http.Agent;
  readonly #authorization: string | undefined;

  constructor(options: SchemaRegistryOptions) {
    this.#options = options;
    const keepAlive = { keepAlive: true, maxSockets: 4 };
    const ssl = typeof options.ssl === 'object' ? options.ssl : {};
    this.#agent = options.url.startsWith('https:')
      ? new https.Agent({ ...keepAlive, ...ssl })
      : new http.Agent(keepAlive);
    const auth = options.basicAuth;
    this.#authorization = auth
      ? `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}`
      : undefined;
  }

  /** The registry's URL as logs and errors show it: without user info. */
  get url(): string {
    return withoutUserInfo(this.#options.url);
  }

  async schemaById(id: number): Promise<RegistryAnswer> {
    return this.#answer(`/schemas/ids/${id}`, id, NOT_FOUND_BY_ID);
  }

  /**
   * A referenced schema: `GET /subjects/{subject}/versions/{version}`. `forId` is the id
   * whose schema references it (for the errors).
   */
  async schemaByVersion(subject: string, version: number, forId: number): Promise<RegistryAnswer> {
    return this.#answer(
      `/subjects/${encodeURIComponent(subject)}/versions/${version}`,
      forId,
      NOT_FOUND_BY_VERSION,
    );
  }

  async #answer(path: string, id: number, notFoundCodes: readonly number[]): Promise<RegistryAnswer> {
    const { status, body } = await this.#get(path, id);
    let parsed: {
      schema?: unknown;
      schemaType?: unknown;
      references?: unknown;
      error_code?: unknown;
      message?: unknown;
    };
    try {
      parsed = JSON.parse(body) as typeof parsed;
    } catch {
      throw new SchemaRegistryUnavailableError(
        this.url,
        id,
        `HTTP ${status}, not JSON: ${body.slice(0, 200)}`,
      );
    }
    const references = referencesOf(parsed.references);
    if (status === 200 && typeof parsed.schema === 'string' && references) {
      // Confluent leaves schemaType out for Avro.
      const schemaType = typeof parsed.schemaType === 'string' ? parsed.schemaType : 'AVRO';
      return { found: true, schemaType, schema: parsed.schema, references };
    }
    // Only Confluent's "schema not found" is an answer about the input: another 404 (a URL
    // without the API's base path, a proxy) would dead-letter every record of a healthy topic.
    if (status === 404 && notFoundCodes.includes(parsed.error_code as number)) {
      return { found: false, message: typeof parsed.message === 'string' ? parsed.message : 'not found' };
    }
    throw new SchemaRegistryUnavailableError(this.url, id, `HTTP ${status}: ${body.slice(0, 200)}`);
  }

  close(): void {
    this.#agent.destroy();
  }

  #get(path: string, id: number): Promise<{ status: number; body: string }> {
    const url = `${this.#options.url}${path}`;
    return new Promise((resolve, reject) => {
      const fail = (why: string) => reject(new SchemaRegistryUnavailableError(this.url, id, why));
      const request = (url.startsWith('https:') ? https : http).get(
        url,
        {
          agent: this.#agent,
          headers: {
            Accept: 'application/vnd.schemaregistry.v1+json, application/json',
            ...(this.#authorization ? { Authorization: this.#authorization } : {}),
          },
          timeout: this.#options.requestTimeoutMs,
        },
        (response) => {
          const chunks: Buffer[] = [];
          let bytes = 0;
          response.on('data', (chunk: Buffer) => {
            bytes += chunk.length;
            if (bytes > MAX_ANSWER_BYTES) {
              request.destroy();
              fail(`an answer above ${MAX_ANSWER_BYTES} bytes`);
            } else chunks.push(chunk);
          });
          response.on('end', () =>
            resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
          );
          response.on('error', (error) => fail(error.message));
        },
      );
      request.on('timeout', () => {
        request.destroy();
        fail(`no answer within ${this.#options.requestTimeoutMs} ms`);
      });
      request.on('error', (error: NodeJS.ErrnoException) => fail(error.code ?? error.message));
    });
  }
}

/** The answer's `references` (absent: none), or undefined when they are not Confluent's shape. */
function referencesOf(value: unknown): SchemaReference[] | undefined {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) return undefined;
  const references: SchemaReference[] = [];
  for (const r of value as unknown[]) {
    if (typeof r !== 'object' || r === null) return undefined;
    const { name, subject, version } = r as Record<string, unknown>;
    if (typeof name !== 'string' || typeof subject !== 'string' || typeof version !== 'number')
      return undefined;
    references.push({ name, subject, version });
  }
  return references;
}
