import crypto from 'node:crypto';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { newId, OrlojError, validationError } from '@orloj/common/core';
import type { ResolvedConfig } from '@orloj/common/config';
import type { Store, User } from '@orloj/common/store';
import { EMAIL_MAX_BYTES, PASSWORD_MAX, PASSWORD_MIN } from '../contract/requests.js';
import { hashPassword } from './password.js';

/**
 * Accounts: the rules of an email and a password, who may register
 * (REGISTRATION: open, closed or by invitation) and the invitations
 * themselves. Shared by `POST /auth/register` and the operator's commands
 * (`orloj invite`, `orloj user add`).
 */

// The email format of the OpenAPI document's validators, without an Ajv instance of its own to build at start.
const EMAIL = fullFormats.email as RegExp;
const isEmail = (email: string): boolean => EMAIL.test(email);

/** Email trimmed and lower-cased, at most EMAIL_MAX_BYTES; password PASSWORD_MIN to PASSWORD_MAX characters. Throws 400 naming each bad field. */
export function normalizeCredentials(body: { email: string; password: string }): { email: string; password: string } {
  const email = normalizeEmail(body.email);
  const errors = [];
  if (Buffer.byteLength(email, 'utf8') > EMAIL_MAX_BYTES || !isEmail(email)) {
    errors.push({ field: 'email', message: `must be a valid email address of at most ${EMAIL_MAX_BYTES} bytes` });
  }
  const length = [...body.password].length;
  if (length < PASSWORD_MIN || length > PASSWORD_MAX) errors.push({ field: 'password', message: `must be ${PASSWORD_MIN} to ${PASSWORD_MAX} characters` });
  if (errors.length) throw validationError(errors);
  return { email, password: body.password };
}

export const normalizeEmail = (email: string): string => email.trim().toLowerCase();

/** A new account (the password hashed), not yet stored. */
export async function newAccount(credentials: { email: string; password: string }, now: number): Promise<User> {
  const { email, password } = normalizeCredentials(credentials);
  return { id: newId(), email, passwordHash: await hashPassword(password), notificationPreference: 'ALL', createdAt: now, updatedAt: now };
}

/** Stores the account; 409 `email_taken` when the email is registered already. */
export async function insertAccount(tx: Store, user: User): Promise<void> {
  if (!(await tx.users.insert(user))) {
    throw new OrlojError('email_taken', 'An account with this email already exists.', {
      fields: [{ field: 'email', message: 'is already registered' }],
    });
  }
}

// ---- invitations -------------------------------------------------------------
//
// An invitation is `<expiry>.<mac>`: the expiry in seconds since the epoch
// and an HMAC-SHA256 over the invited email and that expiry, with a key
// derived from SESSION_SECRET (which every api replica shares). Nothing is
// stored: it is valid for that one email until it expires, and used once,
// since that email can be registered only once. Changing SESSION_SECRET
// voids every invitation (and every session).

/** The longest an invitation may be valid. */
export const INVITATION_MAX_MS = 90 * 24 * 60 * 60 * 1000;
const INVITATION = /^(\d{1,12})\.([A-Za-z0-9_-]{43})$/;

function invitationMac(secret: string, email: string, expiresAtSeconds: number): string {
  const key = crypto.createHmac('sha256', secret).update('orloj invitation v1').digest();
  return crypto.createHmac('sha256', key).update(`${email}\n${expiresAtSeconds}`).digest('base64url');
}

/** An invitation for `email` (normalized as registration does), valid until `expiresAt` (ms). */
export function mintInvitation(config: Pick<ResolvedConfig, 'sessionSecret'>, email: string, expiresAt: number): string {
  const seconds = Math.floor(expiresAt / 1000);
  return `${seconds}.${invitationMac(config.sessionSecret, normalizeEmail(email), seconds)}`;
}

/** Whether `code` invites `email` (normalized) and has not expired at `now`. */
export function invitationValid(config: Pick<ResolvedConfig, 'sessionSecret'>, code: string, email: string, now: number): boolean {
  const match = INVITATION.exec(code);
  if (!match) return false;
  const seconds = Number(match[1]);
  if (seconds * 1000 <= now) return false;
  const expected = Buffer.from(invitationMac(config.sessionSecret, email, seconds));
  const given = Buffer.from(match[2]!);
  return expected.length === given.length && crypto.timingSafeEqual(expected, given);
}

/**
 * Whether REGISTRATION lets `email` register with `invitation` now; throws
 * 403 otherwise: `registration_closed` (closed), `invitation_invalid` (by
 * invitation, with none or a wrong or expired one). The first account of an
 * installation is always let in. With `lock`, run inside the transaction that
 * inserts: no other registration can add the first account meanwhile.
 */
export async function checkRegistration(
  tx: Store,
  config: Pick<ResolvedConfig, 'registration' | 'sessionSecret'>,
  request: { email: string; invitation: string | undefined; now: number },
  lock = false,
): Promise<void> {
  if (config.registration === 'open') return;
  if (lock) await tx.users.lockAgainstNewUsers();
  if (!(await tx.users.any())) return;
  if (config.registration === 'closed') {
    throw new OrlojError('registration_closed', 'Registration is closed on this installation: ask its operator for an account.');
  }
  if (request.invitation === undefined) {
    throw new OrlojError('invitation_invalid', 'Registration needs an invitation on this installation: ask its operator for one.', {
      fields: [{ field: 'invitation', message: 'is required' }],
    });
  }
  if (!invitationValid(config, request.invitation, request.email, request.now)) {
    throw new OrlojError('invitation_invalid', 'The invitation is not valid for this email, or it has expired.', {
      fields: [{ field: 'invitation', message: 'is not valid for this email or has expired' }],
    });
  }
}
