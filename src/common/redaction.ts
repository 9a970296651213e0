/**
 * Secrets never leave the process: not in a log line, an error text, `validate`'s or
 * `inspect`'s output, a metric or a dead letter. Two layers:
 *
 * - by structure: the sections that hold secrets are shown with every value replaced
 *   (client.ssl, client.sasl except its mechanism, lance.storageOptions,
 *   schemaRegistry.basicAuth and schemaRegistry.ssl), and a URL's user info is cut;
 * - by value: every secret a definition resolved (passwords, keys, tokens; not the
 *   identities beside them) is registered here (config/resolve.ts),
 *   and the logger's destination, the CLI's error line and dead-letter texts pass
 *   through `scrubSecrets`, so one that reaches a text some other way (a library echoing
 *   its options in an error) is still replaced.
 */

export const REDACTED = '[redacted]';

/** `https://user:pass@host/x` → `https://[redacted]@host/x`; any other text unchanged. */
export function withoutUserInfo(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/@\s]*@/i, `$1${REDACTED}@`);
}

/** An object of secrets shown by its keys only; `true`/`false` (ssl: true) are not secrets. */
export function redactedValues(
  section: Readonly<Record<string, unknown>> | boolean | undefined,
  keep: readonly string[] = [],
): Record<string, unknown> | boolean | undefined {
  if (section === undefined || typeof section === 'boolean') return section;
  return Object.fromEntries(
    Object.entries(section).map(([k, v]) => [k, keep.includes(k) || typeof v === 'boolean' ? v : REDACTED]),
  );
}

/** The kafkajs client options as a log may show them. */
export function redactedClient(client: {
  readonly ssl?: unknown;
  readonly sasl?: unknown;
  readonly [key: string]: unknown;
}): Record<string, unknown> {
  const { ssl, sasl, ...rest } = client;
  return {
    ...rest,
    ...(ssl !== undefined ? { ssl: redactedValues(ssl as Record<string, unknown> | boolean) } : {}),
    ...(sasl !== undefined ? { sasl: redactedValues(sasl as Record<string, unknown>, ['mechanism']) } : {}),
  };
}

/** Secret texts shorter than this are not scrubbed by value (they would blank ordinary words). */
const MIN_SCRUBBED_LENGTH = 4;

const secrets = new Set<string>();
let ordered: string[] = [];

/** Registers secret values (strings or the text of Buffers) to scrub from every text. */
export function registerSecrets(values: Iterable<string | Buffer>): void {
  let added = false;
  for (const value of values) {
    const text = typeof value === 'string' ? value : value.toString('utf8');
    for (const form of [text, JSON.stringify(text).slice(1, -1), ...pemBodies(text)]) {
      if (form.length < MIN_SCRUBBED_LENGTH || secrets.has(form)) continue;
      secrets.add(form);
      added = true;
    }
  }
  // Longest first: a secret containing another is replaced whole.
  if (added) ordered = [...secrets].sort((a, b) => b.length - a.length);
}

/** Every registered secret in `text` replaced. */
export function scrubSecrets(text: string): string {
  let out = text;
  for (const secret of ordered) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  return out;
}

/** The base64 lines of PEM blocks: a library may show a key's body without its armour. */
function pemBodies(text: string): string[] {
  if (!text.includes('-----BEGIN')) return [];
  return text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l.length >= 16 && !l.startsWith('-----'));
}

/**
 * Options that name an identity rather than hold a secret: hidden by structure where
 * kafka-lance shows its options, but not scrubbed by value, since a user or key id is
 * often an ordinary word ("kafka-lance") that every line would lose.
 */
const IDENTITIES = ['mechanism', 'username', 'accessKeyId', 'authorizationIdentity'];
/** storageOptions whose values are secrets; the others (endpoint, region, ...) are hidden by structure only. */
const SECRET_STORAGE_OPTION = /secret|token|password|key$|sas|credential/i;

/** The secret values a resolved definition holds, to scrub from every text by value. */
export function secretValuesOf(consumer: {
  readonly client: { readonly ssl?: unknown; readonly sasl?: unknown };
  readonly lance: { readonly storageOptions?: Readonly<Record<string, string>> };
  readonly schemaRegistry?: { readonly url: string; readonly basicAuth?: unknown; readonly ssl?: unknown };
}): (string | Buffer)[] {
  const out: (string | Buffer)[] = [];
  const collect = (value: unknown, skip: readonly string[] = []) => {
    if (typeof value === 'string' || Buffer.isBuffer(value)) out.push(value);
    else if (Array.isArray(value)) value.forEach((v) => collect(v));
    else if (value !== null && typeof value === 'object')
      for (const [k, v] of Object.entries(value)) if (!skip.includes(k)) collect(v);
  };
  collect(consumer.client.ssl, ['servername']);
  collect(consumer.client.sasl, IDENTITIES);
  for (const [key, value] of Object.entries(consumer.lance.storageOptions ?? {}))
    if (SECRET_STORAGE_OPTION.test(key)) out.push(value);
  collect(consumer.schemaRegistry?.basicAuth, IDENTITIES);
  collect(consumer.schemaRegistry?.ssl);
  const userInfo = /^[a-z][a-z0-9+.-]*:\/\/([^/@\s]*)@/i.exec(consumer.schemaRegistry?.url ?? '')?.[1];
  const password = userInfo?.split(':')[1];
  if (password) out.push(password, safeDecode(password));
  return out;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
