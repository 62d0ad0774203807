import fs from 'node:fs';
import { loadConfig, resolveSecrets } from '@orloj/common/config';
import { formatDuration, parseDuration } from '@orloj/common/core';
import { INVITATION_MAX_MS, insertAccount, mintInvitation, newAccount } from '@orloj/api';

type Env = Record<string, string | undefined>;

/** How long an invitation is valid unless `--expires` says otherwise. */
const INVITATION_DEFAULT_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * `orloj invite <email> [--expires 7d]`: an invitation for one email
 * (REGISTRATION=invitation), and the sign-up link that carries it. Signed
 * with SESSION_SECRET (or the one generated in DATA_DIR), so it must run
 * with the api's configuration; nothing is stored.
 */
export function invite(email: string, expires: string | undefined, env: Env = process.env, now = Date.now()): { code: string; link: string; expiresAt: number } {
  const validMs = expires === undefined ? INVITATION_DEFAULT_MS : parseDuration(expires);
  if (validMs === undefined || validMs > INVITATION_MAX_MS) {
    throw new Error(`--expires must be a duration such as 7d or 12h, at most ${formatDuration(INVITATION_MAX_MS)} (got "${expires}")`);
  }
  const config = resolveSecrets(loadConfig(env));
  const expiresAt = now + validMs;
  const code = mintInvitation(config, email, expiresAt);
  return { code, link: `${config.serverHostUrl}/signup?invitation=${encodeURIComponent(code)}`, expiresAt };
}

/**
 * `orloj user add <email> --password-file <file>`: creates an account
 * directly in the store, whatever REGISTRATION says (the way to add people
 * to a closed installation). The password is the file's first line.
 */
export async function addUser(email: string, passwordFile: string, env: Env = process.env): Promise<string> {
  const password = fs.readFileSync(passwordFile, 'utf8').split(/\r?\n/)[0] ?? '';
  const config = loadConfig(env);
  const user = await newAccount({ email, password }, Date.now());
  const { openDatabase, Store } = await import('@orloj/common/store');
  const database = openDatabase(config.databaseUrl, { tls: config.databaseTls, upkeep: false });
  try {
    await database.migrate();
    await Store.fromHandle(database).transaction((tx) => insertAccount(tx, user));
  } finally {
    await database.close();
  }
  return user.email;
}
