import crypto from 'node:crypto';
import { PRODUCER_ROLES, type ProducerRole, type RoleKeys } from '@orloj/common/envelope';

/** A fresh Ed25519 key pair for every role, held in memory: tests sign as any role. */
export function generateKeys(): RoleKeys {
  const privateKeys: RoleKeys['privateKeys'] = {};
  const publicKeys: RoleKeys['publicKeys'] = {};
  for (const role of PRODUCER_ROLES as readonly ProducerRole[]) {
    const pair = crypto.generateKeyPairSync('ed25519');
    privateKeys[role] = pair.privateKey;
    publicKeys[role] = pair.publicKey;
  }
  return { privateKeys, publicKeys };
}
