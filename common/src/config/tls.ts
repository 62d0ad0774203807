import crypto from 'node:crypto';
import fs from 'node:fs';

/**
 * The files of one mutual-TLS client: the CA that signs the server's
 * certificate, and this process's certificate and key. Every field is
 * optional: a CA alone verifies the server without presenting a certificate.
 */
export interface TlsFiles {
  readonly caFile?: string;
  readonly certFile?: string;
  readonly keyFile?: string;
}

/** The PEM contents, as node:tls takes them. */
export interface TlsMaterial {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

/**
 * Reads and checks `<PREFIX>_CA_FILE`, `_CERT_FILE` and `_KEY_FILE`: each set
 * file must be readable PEM, a certificate needs its key and the key must
 * belong to it. Problems are pushed naming the variable; the result is
 * undefined when none of the three is set.
 */
export function readTlsFiles(prefix: string, raw: (name: string) => string | undefined, problems: string[]): TlsFiles | undefined {
  const names = { caFile: `${prefix}_CA_FILE`, certFile: `${prefix}_CERT_FILE`, keyFile: `${prefix}_KEY_FILE` } as const;
  const files: { caFile?: string; certFile?: string; keyFile?: string } = {};
  const contents: TlsMaterial = {};
  for (const field of ['caFile', 'certFile', 'keyFile'] as const) {
    const file = raw(names[field]);
    if (file === undefined) continue;
    files[field] = file;
    let text: Buffer;
    try {
      text = fs.readFileSync(file);
    } catch (err) {
      problems.push(`${names[field]} names a file that cannot be read: ${file} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
      continue;
    }
    const kind = field === 'keyFile' ? 'PRIVATE KEY' : 'CERTIFICATE';
    if (!new RegExp(`-----BEGIN [A-Z ]*${kind}-----`).test(text.toString('latin1'))) {
      problems.push(`${names[field]} must name a PEM file holding a ${kind.toLowerCase()} (${file} holds none)`);
      continue;
    }
    contents[field === 'caFile' ? 'ca' : field === 'certFile' ? 'cert' : 'key'] = text;
  }
  if (files.certFile !== undefined && files.keyFile === undefined) problems.push(`${names.certFile} needs ${names.keyFile} (the certificate's private key)`);
  if (files.keyFile !== undefined && files.certFile === undefined) problems.push(`${names.keyFile} needs ${names.certFile} (the certificate it belongs to)`);
  if (contents.cert && contents.key) {
    try {
      if (!new crypto.X509Certificate(contents.cert).checkPrivateKey(crypto.createPrivateKey(contents.key))) {
        problems.push(`${names.keyFile} does not belong to the certificate in ${names.certFile}`);
      }
    } catch (err) {
      problems.push(`${names.certFile} and ${names.keyFile} cannot be parsed: ${(err as Error).message}`);
    }
  }
  return Object.keys(files).length ? Object.freeze(files) : undefined;
}

/** The PEM contents of the files, read when a store or bus is opened. */
export function tlsMaterial(files: TlsFiles): TlsMaterial {
  const material: TlsMaterial = {};
  if (files.caFile !== undefined) material.ca = fs.readFileSync(files.caFile);
  if (files.certFile !== undefined) material.cert = fs.readFileSync(files.certFile);
  if (files.keyFile !== undefined) material.key = fs.readFileSync(files.keyFile);
  return material;
}
