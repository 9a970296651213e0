import { Invalid } from './field-codec';

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Standard base64, padded; anything Buffer.from would quietly skip or guess at is refused. */
export function fromBase64(text: string): Uint8Array | Invalid {
  if (text.length % 4 !== 0 || !BASE64.test(text))
    return new Invalid('not base64 (standard alphabet, padded to a multiple of 4 characters)');
  const bytes = Buffer.from(text, 'base64');
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
