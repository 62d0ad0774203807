import crypto, { type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../config/config.js';
import { tightenFile } from '../config/data-dir.js';
import { PRODUCER_ROLES, type ProducerRole } from '../messages/table.js';

export interface RoleKeys {
  /** The keys this process may sign with: one role in the distributed topology, all of them embedded. */
  readonly privateKeys: Partial<Record<ProducerRole, KeyObject>>;
  /** The keys this process verifies with. */
  readonly publicKeys: Partial<Record<ProducerRole, KeyObject>>;
}

/** `ORLOJ_LOG_INGEST_PRIVATE_KEY` and friends. */
export function keyEnvName(role: ProducerRole, kind: 'private' | 'public'): string {
  return `ORLOJ_${role.toUpperCase().replace(/-/g, '_')}_${kind.toUpperCase()}_KEY`;
}

/**
 * Keys from `ORLOJ_<ROLE>_PRIVATE_KEY` / `ORLOJ_<ROLE>_PUBLIC_KEY` (PEM; `\n`
 * escapes allowed) or the `…_FILE` variants naming a PEM file. A role's
 * public key defaults to the one derived from its private key. The caller
 * passes the environment; nothing here reads process.env.
 */
export function loadKeysFromEnv(env: Readonly<Record<string, string | undefined>>): RoleKeys {
  const problems: string[] = [];
  const privateKeys: Partial<Record<ProducerRole, KeyObject>> = {};
  const publicKeys: Partial<Record<ProducerRole, KeyObject>> = {};
  for (const role of PRODUCER_ROLES) {
    for (const kind of ['private', 'public'] as const) {
      const name = keyEnvName(role, kind);
      const pem = readPem(env, name, problems);
      if (pem === undefined) continue;
      try {
        if (kind === 'private') privateKeys[role] = privateKeyFromPem(pem, name);
        else publicKeys[role] = publicKeyFromPem(pem, name);
      } catch (err) {
        problems.push((err as Error).message);
      }
    }
    const own = privateKeys[role];
    if (!own) continue;
    const derived = crypto.createPublicKey(own);
    const given = publicKeys[role];
    if (!given) publicKeys[role] = derived;
    else if (!given.equals(derived)) problems.push(`${keyEnvName(role, 'public')} does not match ${keyEnvName(role, 'private')}`);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { privateKeys, publicKeys };
}

function readPem(env: Readonly<Record<string, string | undefined>>, name: string, problems: string[]): string | undefined {
  const direct = env[name]?.trim() || undefined;
  const file = env[`${name}_FILE`]?.trim() || undefined;
  if (direct && file) {
    problems.push(`set either ${name} or ${name}_FILE, not both`);
    return undefined;
  }
  if (direct) return direct.replace(/\\n/g, '\n');
  if (!file) return undefined;
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    problems.push(`${name}_FILE names a file that cannot be read: ${file}`);
    return undefined;
  }
}

export function privateKeyFromPem(pem: string | Buffer, source: string): KeyObject {
  let key: KeyObject;
  try {
    key = crypto.createPrivateKey(pem);
  } catch {
    throw new Error(`${source} is not a PEM private key`);
  }
  return ed25519(key, source);
}

export function publicKeyFromPem(pem: string | Buffer, source: string): KeyObject {
  let key: KeyObject;
  try {
    key = crypto.createPublicKey(pem);
  } catch {
    throw new Error(`${source} is not a PEM public key`);
  }
  return ed25519(key, source);
}

function ed25519(key: KeyObject, source: string): KeyObject {
  if (key.asymmetricKeyType !== 'ed25519') throw new Error(`${source} must be an Ed25519 key, not ${key.asymmetricKeyType ?? 'unknown'}`);
  return key;
}

/**
 * The embedded default's keys: `<dataDir>/keys/<role>.key` (mode 0600) and
 * `<role>.pub`, generated on first start and reused afterwards. Files are
 * written to a temporary name and hard-linked into place, so two processes
 * starting at once agree on one key and a crash never leaves half a key.
 */
export async function ensureKeyDir(dataDir: string, options: { generate?: boolean } = {}): Promise<RoleKeys> {
  const generate = options.generate ?? true;
  const dir = path.join(dataDir, 'keys');
  if (!generate && !fs.existsSync(dir)) return { privateKeys: {}, publicKeys: {} };
  await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 });
  const privateKeys: Partial<Record<ProducerRole, KeyObject>> = {};
  const publicKeys: Partial<Record<ProducerRole, KeyObject>> = {};
  for (const role of PRODUCER_ROLES) {
    const keyFile = path.join(dir, `${role}.key`);
    const pubFile = path.join(dir, `${role}.pub`);
    let keyPem = await readIfExists(keyFile);
    if (keyPem === undefined && !generate) {
      // Only the public half may be there (a process that verifies this role).
      const pub = await readIfExists(pubFile);
      if (pub !== undefined) publicKeys[role] = publicKeyFromPem(pub, pubFile);
      continue;
    }
    if (keyPem === undefined) {
      const generated = crypto.generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
      keyPem = await createOnce(keyFile, generated, 0o600);
    }
    tightenFile(keyFile); // one left readable by an earlier version or umask
    const privateKey = privateKeyFromPem(keyPem, keyFile);
    const derived = crypto.createPublicKey(privateKey).export({ type: 'spki', format: 'pem' }).toString();
    const pubPem = (await readIfExists(pubFile)) ?? (await createOnce(pubFile, derived, 0o644));
    if (pubPem.trim() !== derived.trim()) throw new ConfigError([`${pubFile} does not match ${keyFile}; delete the .pub file to have it rewritten`]);
    privateKeys[role] = privateKey;
    publicKeys[role] = publicKeyFromPem(pubPem, pubFile);
  }
  return { privateKeys, publicKeys };
}

async function readIfExists(file: string): Promise<string | undefined> {
  try {
    return await fs.promises.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Writes content to file unless it exists; returns what the file holds afterwards. */
async function createOnce(file: string, content: string, mode: number): Promise<string> {
  const tmp = `${file}.${process.pid}.${crypto.randomBytes(6).toString('hex')}.tmp`;
  await fs.promises.writeFile(tmp, content, { mode, flag: 'wx' });
  try {
    await fs.promises.link(tmp, file);
    return content;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return fs.promises.readFile(file, 'utf8');
  } finally {
    await fs.promises.rm(tmp, { force: true });
  }
}

/**
 * The public keys each role needs besides its own: the producers of what it
 * consumes (PRODUCER_POLICY). A process missing one would reject every such
 * message, so it must not start.
 */
export const ROLE_VERIFIES: Readonly<Record<ProducerRole, readonly ProducerRole[]>> = {
  // job and build events from runners, wake-ups from the api
  scheduler: ['runners', 'api'],
  // job.run and build.run from the scheduler, job.stop from the scheduler and the api
  runners: ['scheduler', 'api'],
  // log batches from runners
  'log-ingest': ['runners'],
  // domain events from its own outbox relay
  notifier: ['notifier'],
  // live log lines from log-ingest
  api: ['log-ingest'],
};

/**
 * Refuses keys that cannot work for these roles: each needs its own private
 * key (to sign) and the public keys of the roles it hears from (to verify).
 * The message names the variable to set.
 */
export function requireRoleKeys(keys: RoleKeys, roles: Iterable<ProducerRole>): void {
  const problems: string[] = [];
  const missingPublic = new Set<ProducerRole>();
  for (const role of roles) {
    if (!keys.privateKeys[role]) problems.push(`${keyEnvName(role, 'private')} (or ${keyEnvName(role, 'private')}_FILE) is not set: the ${role} role cannot sign its messages`);
    for (const from of ROLE_VERIFIES[role]) if (!keys.publicKeys[from]) missingPublic.add(from);
  }
  for (const from of missingPublic) {
    problems.push(`${keyEnvName(from, 'public')} (or ${keyEnvName(from, 'public')}_FILE) is not set: messages from the ${from} role could not be verified`);
  }
  if (problems.length > 0) throw new ConfigError(problems);
}

/** A short, stable name of a public key (first 16 hex digits of its SHA-256), for labels and logs. */
export function keyFingerprint(key: KeyObject): string {
  return crypto.createHash('sha256').update(key.export({ type: 'spki', format: 'der' })).digest('hex').slice(0, 16);
}
